// DMAs and semaphores in kernel bodies and programs (issue 11): the forms
// parse and print back, bad uses are located errors, the stepper's semaphore
// semantics (a wait retires a copy only once the other copies on its
// semaphore could not have supplied the bytes waited), and the lowering that
// puts the body's DMAs into the kernel's program next to the pipeline's own.
#include "spec/lower.hpp"
#include "spec/parse.hpp"
#include "spec/print.hpp"
#include "spec/step.hpp"
#include "spec/typecheck.hpp"

#include <gtest/gtest.h>

#include <sstream>

using namespace pipecheck::spec;

namespace {

const char *kKernel = R"(kernel k:
    param n = 4
    grid = (n,)
    target = tpu_v5e
    in  a: f32[n * 8, 128]  memory_space=any
    out o: f32[n * 8, 128]  block=(8, 128)  index=(i) -> (i, 0)
    scratch x: f32[2, 8, 128]
    scratch sem: dma_sem[2]
    scratch r: semaphore
    body:
        i = program_id(0)
        c = async_copy(a[ds(i * 8, 8), :], x[i % 2], sem[i % 2])
        c.start()
        c.wait()
        async_copy(a[ds(i * 8, 8), :], x[0], sem[0]).start()
        async_copy(a[ds(i * 8, 8), :], x[0], sem[0]).wait()
        sync_copy(x[0], x[1])
        semaphore_signal(r, 2)
        semaphore_wait(r, 2)
        o[...] = x[1]
)";

ParseResult parse_text(const std::string &text) {
  return parse_and_validate(SourceFile::from_string("t.pk", text));
}

std::string first_error(const std::string &text) {
  auto r = parse_text(text);
  if (!r.file) {
    const auto &e = r.errors.at(0);
    return std::to_string(e.loc.line) + ":" + std::to_string(e.loc.col) + " " + e.message;
  }
  auto errs = typecheck(std::get<KernelSpec>(r.file->units.at(0)));
  if (errs.empty()) return "";
  return std::to_string(errs[0].loc.line) + ":" + std::to_string(errs[0].loc.col) + " " + errs[0].message;
}

std::string replace(std::string s, const std::string &from, const std::string &to) {
  auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

/// One line per stepper event: "L<line> start op0", "L<line> retire op1 op0", ...
struct Recorder : StepConsumer {
  std::ostringstream out;
  void on_compute(const Stmt &s, const std::vector<StepRef> &, const std::optional<StepRef> &) override {
    out << "L" << s.loc.line << " compute\n";
  }
  void on_start(const Stmt &s, int op, const AsyncStart &a) override {
    out << "L" << s.loc.line << " start op" << op << (a.kind == AsyncKind::copy_in ? " in" : " out") << "\n";
  }
  void on_wait(const Stmt &s, const std::optional<StepRef> &, const std::vector<int> &retired) override {
    out << "L" << s.loc.line << " retire";
    for (int op : retired)
      out << " op" << op;
    out << "\n";
  }
  void on_undefined(const Stmt &, const StepPlace &) override {}
  void on_fault(const Stmt &s, FaultKind k, const std::string &m) override {
    out << "L" << s.loc.line << (k == FaultKind::wait_without_copy ? " hang: " : " fault: ") << m << "\n";
  }
  void on_end(const std::vector<int> &in_flight) override {
    out << "end in_flight=" << in_flight.size() << "\n";
  }
};

std::string step(const std::string &text) {
  auto r = parse_text(text);
  EXPECT_TRUE(r.file) << (r.errors.empty() ? "" : r.errors[0].message);
  if (!r.file) return "";
  const Program &p = std::get<Program>(r.file->units.at(0));
  Env env;
  Recorder rec;
  Stepper(p, p.body, env).run(rec);
  return rec.out.str();
}

} // namespace

TEST(DmaSyntax, EveryKernelBodyFormPrintsBackToTheSameKernel) {
  auto r = parse_text(kKernel);
  ASSERT_TRUE(r.file) << r.errors.at(0).message;
  const std::string printed = print(*r.file);
  EXPECT_NE(printed.find("scratch sem: dma_sem[2]"), std::string::npos) << printed;
  EXPECT_NE(printed.find("scratch r: semaphore\n"), std::string::npos) << printed;
  EXPECT_NE(printed.find("c = async_copy(a[ds(i * 8, 8), :], x[i % 2], sem[i % 2])"), std::string::npos);
  EXPECT_NE(printed.find("async_copy(a[ds(i * 8, 8), :], x[0], sem[0]).wait()"), std::string::npos);
  auto again = parse_text(printed);
  ASSERT_TRUE(again.file) << again.errors.at(0).message;
  EXPECT_EQ(*again.file, *r.file);
  EXPECT_TRUE(typecheck(std::get<KernelSpec>(r.file->units.at(0))).empty());
}

TEST(DmaSyntax, AProgramsPrimitivesAndSemaphoreBuffersPrintBack) {
  const char *text = R"(pipeline p:
    hbm A: f32[2, 8]
    sram X[2]: f32[8]
    sem S: dma_sem[2]
    sem R: semaphore
    dma_start(A[0], X[0], S[0])
    dma_wait(X[0], S[0])
    sync_copy(X[0], A[1])
    semaphore_signal(R, 1)
    semaphore_wait(R, 1)
)";
  auto r = parse_text(text);
  ASSERT_TRUE(r.file) << r.errors.at(0).message;
  EXPECT_EQ(print(*r.file), text);
}

TEST(DmaSyntax, ADmaBetweenDifferentShapesIsALocatedError) {
  EXPECT_EQ(
      first_error(replace(kKernel, "c = async_copy(a[ds(i * 8, 8), :]", "c = async_copy(a[ds(i * 8, 4), :]")),
      "12:9 copies a[ds(i * 8, 4), :] (f32[4, 128]) to x[i % 2] (f32[8, 128]): a DMA needs the same shape "
      "and "
      "dtype on both sides");
}

TEST(DmaSyntax, ASemaphoreArgumentThatIsNoSemaphoreIsALocatedError) {
  EXPECT_EQ(first_error(replace(kKernel, "x[0], sem[0]).start()", "x[0], x[1]).start()")),
            "15:46 'x' is not a semaphore (declare 'scratch x: dma_sem[n]')");
  EXPECT_EQ(first_error(replace(kKernel, "x[0], sem[0]).start()", "x[0], r).start()")),
            "15:46 'r' is a regular semaphore; a DMA signals a dma_sem");
  EXPECT_EQ(first_error(replace(kKernel, "semaphore_signal(r, 2)", "semaphore_signal(sem[0], 2)")),
            "18:26 'sem' is a DMA semaphore; semaphore_signal/semaphore_wait take a regular one");
  EXPECT_EQ(first_error(replace(kKernel, "x[0], sem[0]).start()", "x[0], sem).start()")),
            "15:46 'sem' is an array of semaphores of rank 1; name one with 1 index(es): sem[k]");
}

TEST(DmaSyntax, AWaitOnAnUnboundDescriptorIsALocatedError) {
  EXPECT_EQ(first_error(replace(kKernel, "        c.wait()", "        d.wait()")),
            "14:9 'd' is no DMA descriptor; bind one first: 'd = async_copy(src, dst, sem)'");
}

TEST(DmaSyntax, ADescriptorBoundInALoopOrWhenBodyIsNotVisibleAfterIt) {
  // (Check said unknown, "cannot evaluate 'p'", and run exited 3 at the
  // lowered program, for a wait after the loop that bound its descriptor.)
  const std::string in_loop =
      replace(kKernel, "        c = async_copy(a[ds(i * 8, 8), :], x[i % 2], sem[i % 2])\n",
              "        for p in range(2):\n"
              "            c = async_copy(a[ds(i * 8, 8), :], x[p], sem[p])\n");
  EXPECT_EQ(first_error(in_loop),
            "14:9 'c' is bound in the body of the statement at line 12 and not visible after "
            "it (a fori_loop's or pl.when's body is a function of its own); bind it again "
            "here: 'c = async_copy(src, dst, sem)'");
  const std::string in_when =
      replace(kKernel, "        c = async_copy(a[ds(i * 8, 8), :], x[i % 2], sem[i % 2])\n",
              "        when i > 0:\n"
              "            c = async_copy(a[ds(i * 8, 8), :], x[i % 2], sem[i % 2])\n");
  EXPECT_NE(first_error(in_when).find("14:9 'c' is bound in the body of the statement at line 12"),
            std::string::npos)
      << first_error(in_when);
  // Bound and used in the one body: fine.
  const std::string inside = replace(kKernel,
                                     "        c = async_copy(a[ds(i * 8, 8), :], x[i % 2], sem[i % 2])\n"
                                     "        c.start()\n        c.wait()\n",
                                     "        for p in range(2):\n"
                                     "            c = async_copy(a[ds(i * 8, 8), :], x[p], sem[p])\n"
                                     "            c.start()\n            c.wait()\n");
  EXPECT_EQ(first_error(inside), "");
}

TEST(DmaSyntax, ASemaphoreIsNoDataToLoadOrStore) {
  EXPECT_EQ(
      first_error(replace(kKernel, "o[...] = x[1]", "o[...] = sem[0]")),
      "20:18 'sem' is a semaphore: DMAs and semaphore_signal/semaphore_wait use it, loads and stores cannot");
}

TEST(DmaSyntax, ASemaphoreIsScratchOnly) {
  EXPECT_EQ(first_error(replace(kKernel, "scratch r: semaphore", "in r: semaphore")),
            "9:11 a semaphore is scratch: 'scratch r: dma_sem[n]'");
}

TEST(DmaSemantics, AWaitRetiresNoCopyWhileAnotherCopyOnItsSemaphoreCouldHaveSuppliedTheBytes) {
  EXPECT_EQ(step(R"(pipeline p:
    hbm A: f32[2, 8]
    sram X[2]: f32[8]
    sem S: dma_sem
    dma_start(A[0], X[0], S)
    dma_start(A[1], X[1], S)
    dma_wait(X[0], S)
    dma_wait(X[1], S)
)"),
            "L5 start op0 in\nL6 start op1 in\nL7 retire\nL8 retire op0 op1\nend in_flight=0\n");
}

TEST(DmaSemantics, AWaitRetiresNoCopyOfMixedSizesUntilTheWaitsCoverThemAll) {
  // 64 + 32 bytes in flight: a semaphore counts bytes as they land, so the
  // wait of 64 may return on the 32-byte copy and half of the other.
  EXPECT_EQ(step(R"(pipeline p:
    hbm A: f32[16]
    sram X: f32[16]
    sem S: dma_sem
    dma_start(A, X, S)
    dma_start(A[0:8], X[0:8], S)
    dma_wait(X, S)
    dma_wait(X[0:8], S)
)"),
            "L5 start op0 in\nL6 start op1 in\nL7 retire\nL8 retire op0 op1\nend in_flight=0\n");
}

TEST(DmaSemantics, AWaitNoCopyCanSatisfyHangsAndACopyNeverWaitedIsInFlightAtTheEnd) {
  EXPECT_EQ(step(R"(pipeline p:
    hbm A: f32[2, 8]
    sram X[2]: f32[8]
    sem S: dma_sem[2]
    dma_start(A[0], X[0], S[0])
    dma_wait(X[0], S[1])
    dma_wait(X[0], S[0])
    dma_wait(X[0], S[0])
    dma_start(A[1], X[1], S[1])
)"),
            "L5 start op0 in\n"
            "L6 hang: waits for 32 bytes on S[1] but no copy on it is in flight: this hangs\n"
            "L7 retire op0\n"
            "L8 hang: waits for 32 bytes on S[0] but no copy on it is in flight: this hangs\n"
            "L9 start op1 in\nend in_flight=1\n");
}

TEST(DmaSemantics, ARegularSemaphoreWaitHangsPastWhatWasSignalledAndSyncCopyRetiresAtOnce) {
  EXPECT_EQ(step(R"(pipeline p:
    hbm A: f32[8]
    sram X: f32[8]
    sem R: semaphore
    semaphore_signal(R, 2)
    semaphore_wait(R, 1)
    semaphore_wait(R, 2)
    sync_copy(X, A)
)"),
            "L5 retire\nL6 retire\n"
            "L7 hang: waits for 2 on R but only 1 was signalled and nothing else signals it: this hangs\n"
            "L8 start op0 out\nL8 retire op0\nend in_flight=0\n");
}

TEST(DmaSemantics, TwoWaitsOfHalfACopyTakeItsBytesAndLeaveTheSemaphoreZero) {
  // 64 bytes copied, waited as two descriptors of 32: the first returns
  // once half has landed; after both no count is left.
  EXPECT_EQ(step(R"(pipeline p:
    hbm A: f32[16]
    sram X: f32[16]
    sem S: dma_sem
    dma_start(A, X, S)
    dma_wait(X[0:8], S)
    dma_wait(X[8:16], S)
)"),
            "L5 start op0 in\nL6 retire\nL7 retire op0\nend in_flight=0\n");
}

TEST(DmaSemantics, WaitsOfHalfOfEachCopyLeaveBothCopiesOutstanding) {
  // Each wait takes 32 of a 64-byte copy's bytes: the two waits may return
  // on half of each copy, so neither is known done (never waited at the end).
  EXPECT_EQ(step(R"(pipeline p:
    hbm A: f32[2, 16]
    sram X: f32[16]
    sem S: dma_sem
    for i in range(2):
        dma_start(A[i], X, S)
        dma_wait(X[0:8], S)
)"),
            "L6 start op0 in\nL7 retire\nL6 start op1 in\nL7 retire\nend in_flight=2\n");
}

TEST(DmaSemantics, AWaitOfPartOfACopyLeavesItInFlightAndItsWindowUnsafeToRead) {
  // The wait returns once 32 of the 64 bytes have landed: the copy is still
  // in flight when X[0:8] is read, and at the end.
  EXPECT_EQ(step(R"(pipeline p:
    hbm A: f32[16]
    sram X: f32[16]
    sem S: dma_sem
    dma_start(A, X, S)
    dma_wait(X[0:8], S)
    X[0:8] = X[0:8] + 1
)"),
            "L5 start op0 in\nL6 retire\nL7 compute\nend in_flight=1\n");
}

TEST(DmaSemantics, ASignalNothingWaitsLeavesARegularSemaphoreNonZeroAtTheEnd) {
  EXPECT_EQ(
      step(R"(pipeline p:
    hbm A: f32[8]
    sram X: f32[8]
    sem R: semaphore[2]
    semaphore_signal(R[0], 1)
    semaphore_signal(R[1], 2)
    semaphore_wait(R[0], 1)
    semaphore_signal(R[1], 1)
)"),
      "L5 retire\nL6 retire\nL7 retire\nL8 retire\n"
      "L6 fault: signals R[1] and nothing waits for the count: the kernel ends with the semaphore at 3, "
      "not zero (Mosaic checks every semaphore is zero at exit)\n"
      "end in_flight=0\n");
}

TEST(DmaLowering, TheBodysDmasJoinTheLoweredProgramAndItsTextParsesBack) {
  // Scratch refs as slices: a program indexes only rings and hbm arrays.
  auto r = parse_text(R"(kernel k:
    param n = 4
    grid = (n,)
    target = tpu_v5e
    in  a: f32[n * 8, 128]  memory_space=any
    out o: f32[n * 8, 128]  block=(8, 128)  index=(i) -> (i, 0)
    scratch x: f32[16, 128]
    scratch sem: dma_sem[2]
    body:
        i = program_id(0)
        c = async_copy(a[ds(i * 8, 8), :], x[0:8, :], sem[i % 2])
        c.start()
        c.wait()
        sync_copy(x[0:8, :], x[8:16, :])
        o[...] = x[8:16, :]
)");
  ASSERT_TRUE(r.file) << r.errors.at(0).message;
  for (bool unroll : {false, true}) {
    LowerOptions o;
    o.unroll = unroll;
    std::vector<Diagnostic> errs;
    auto l = lower(std::get<KernelSpec>(r.file->units.at(0)), o, errs);
    ASSERT_TRUE(l) << (errs.empty() ? "" : errs[0].message);
    const std::string text = print(l->program);
    EXPECT_NE(text.find("sem sem: dma_sem[2]"), std::string::npos) << text;
    EXPECT_NE(text.find("dma_start(a[i * 8:i * 8 + 8, :], x[0:8, :], sem[i % 2])"), std::string::npos)
        << text;
    EXPECT_NE(text.find("dma_wait(x[0:8, :], sem["), std::string::npos) << text;
    EXPECT_NE(text.find("sync_copy(x[0:8, :], x[8:16, :])"), std::string::npos) << text;
    EXPECT_EQ(text.find("async_copy"), std::string::npos) << text;
    auto back = parse_text(text);
    ASSERT_TRUE(back.file) << back.errors.at(0).message << "\n" << text;
    EXPECT_EQ(std::get<Program>(back.file->units.at(0)), l->program);
  }
}

TEST(DmaLowering, AScratchIndexedByItsFirstDimPrintsAsProgramTextThatParsesBack) {
  auto r = parse_text(kKernel);
  ASSERT_TRUE(r.file);
  std::vector<Diagnostic> errs;
  auto l = lower(std::get<KernelSpec>(r.file->units.at(0)), {}, errs);
  ASSERT_TRUE(l) << (errs.empty() ? "" : errs[0].message);
  const std::string text = print(l->program);
  EXPECT_NE(text.find("sync_copy(x[0], x[1])"), std::string::npos) << text;
  auto back = parse_text(text);
  ASSERT_TRUE(back.file) << back.errors.at(0).message << "\n" << text;
  EXPECT_EQ(std::get<Program>(back.file->units.at(0)), l->program);
}
