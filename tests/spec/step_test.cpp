// The one Program stepper (spec/step.hpp) that the race checker and the
// executor both consume: wait matching, wgmma retirement, faults, strict slot
// contents and clipped copies, as events.
#include "spec/parse.hpp"
#include "spec/step.hpp"

#include <gtest/gtest.h>

#include <sstream>

using namespace pipecheck::spec;

namespace {

Program parse_program(const std::string &text) {
  auto r = parse(SourceFile::from_string("t.pk", text));
  EXPECT_TRUE(r.file) << (r.errors.empty() ? "" : r.errors[0].message);
  return std::get<Program>(r.file->units.at(0));
}

/// A consumer that ignores every event (a test overrides the ones it reads).
struct Quiet : StepConsumer {
  void on_compute(const Stmt &, const std::vector<StepRef> &, const std::optional<StepRef> &) override {}
  void on_start(const Stmt &, int, const AsyncStart &) override {}
  void on_wait(const Stmt &, const std::optional<StepRef> &, const std::vector<int> &) override {}
  void on_undefined(const Stmt &, const StepPlace &) override {}
  void on_fault(const Stmt &, FaultKind, const std::string &) override {}
  void on_end(const std::vector<int> &) override {}
};

/// Writes one line per event: "L<line> <what>".
struct Recorder : StepConsumer {
  const Program *program = nullptr;
  std::ostringstream out;
  std::string place(const StepPlace &p) {
    std::string s = program->buffers[p.buffer].name;
    if (p.slot >= 0) s += "[" + std::to_string(p.slot) + "]";
    for (auto &[lo, hi] : p.box)
      s += " " + std::to_string(lo) + ":" + std::to_string(hi);
    return s;
  }
  void on_compute(const Stmt &s, const std::vector<StepRef> &reads,
                  const std::optional<StepRef> &write) override {
    out << "L" << s.loc.line << " compute reads=" << reads.size();
    if (write) out << " write=" << place(write->place);
    out << "\n";
  }
  void on_start(const Stmt &s, int op, const AsyncStart &a) override {
    out << "L" << s.loc.line << " start op" << op;
    if (a.kind != AsyncKind::wgmma) out << " filled=" << place(a.dst_filled);
    out << "\n";
  }
  void on_wait(const Stmt &s, const std::optional<StepRef> &, const std::vector<int> &retired) override {
    out << "L" << s.loc.line << " retire";
    for (int op : retired)
      out << " op" << op;
    out << "\n";
  }
  void on_undefined(const Stmt &s, const StepPlace &slot) override {
    out << "L" << s.loc.line << " undefined " << place(slot) << "\n";
  }
  void on_fault(const Stmt &s, FaultKind k, const std::string &m) override {
    out << "L" << s.loc.line << (k == FaultKind::index_out_of_bounds ? " out-of-bounds: " : " hang: ") << m
        << "\n";
  }
  void on_end(const std::vector<int> &in_flight) override {
    out << "end in_flight=" << in_flight.size() << "\n";
  }
};

std::string run(const std::string &text, Env env = {}) {
  Program p = parse_program(text);
  Recorder r;
  r.program = &p;
  Stepper(p, p.body, env).run(r);
  return r.out.str();
}

} // namespace

TEST(Stepper, ACopyWaitRetiresTheOldestCopyIntoThatSlotOnly) {
  EXPECT_EQ(run(R"(pipeline p:
    hbm A: f32[4, 8]
    sram X[2]: f32[8]
    copy_in_start(A[0], X[0])
    copy_in_start(A[1], X[1])
    copy_in_start(A[2], X[0])
    copy_in_wait(X[0])
    copy_in_wait(X[0])
    copy_in_wait(X[1])
)"),
            "L4 start op0 filled=X[0] 0:8\nL5 start op1 filled=X[1] 0:8\nL6 start op2 filled=X[0] 0:8\n"
            "L7 retire op0\nL8 retire op2\nL9 retire op1\nend in_flight=0\n");
}

TEST(Stepper, AWgmmaWaitRetiresTheOldestUntilNRemain) {
  EXPECT_EQ(run(R"(pipeline p:
    smem A[2]: f32[8, 8]
    acc C: f32[8, 8]
    A[0] = zeros
    A[1] = zeros
    wgmma(C, A[0], A[0])
    wgmma(C, A[1], A[1])
    wgmma(C, A[0], A[1])
    wgmma_wait(1)
    wgmma_wait(0)
)"),
            "L4 compute reads=0 write=A[0] 0:8 0:8\nL5 compute reads=0 write=A[1] 0:8 0:8\n"
            "L6 start op0\nL7 start op1\nL8 start op2\nL9 retire op0 op1\nL10 retire op2\nend in_flight=0\n");
}

TEST(Stepper, ANegativeIndexFaultsAtItsStatementAndEndsTheWalk) {
  // The issue's wrap_minus_one: A[i - 1] at i = 0 is out of bounds, not A[3].
  const std::string out = run(R"(pipeline wrap_minus_one:
    hbm A: f32[4, 128]
    sram X[1]: f32[128]
    sram Y[1]: f32[128]
    for i in range(1):
        Y[0] = zeros
        copy_out_start(Y[0], A[i - 1])
        copy_in_start(A[3], X[0])
        copy_out_wait(Y[0])
        copy_in_wait(X[0])
        copy_out_start(X[0], A[1])
        copy_out_wait(X[0])
)");
  EXPECT_EQ(out,
            "L6 compute reads=0 write=Y[0] 0:128\n"
            "L7 out-of-bounds: 'A[i - 1]': index -1 is out of bounds for dim 0 (extent 4) of A[4, 128]\n");
}

TEST(Stepper, AWaitWithNothingInFlightIsAHangAndTheWalkGoesOn) {
  EXPECT_EQ(run(R"(pipeline p:
    hbm A: f32[8]
    sram X[1]: f32[8]
    copy_in_wait(X[0])
    copy_in_start(A, X[0])
)"),
            "L4 hang: waits for a copy into X[0] but none is in flight: this hangs\n"
            "L5 start op0 filled=X[0] 0:8\nend in_flight=1\n");
}

TEST(Stepper, AWaitedWritebackLeavesItsSlotUndefinedUnlessTheSlotWasWrittenSince) {
  EXPECT_EQ(run(R"(pipeline p:
    hbm A: f32[2, 8]
    sram Y[1]: f32[8]
    Y[0] = zeros
    copy_out_start(Y[0], A[0])
    copy_out_wait(Y[0])
    Y[0] = zeros
    copy_out_start(Y[0], A[0])
    copy_in_start(A[1], Y[0])
    copy_out_wait(Y[0])
    copy_in_wait(Y[0])
)"),
            "L4 compute reads=0 write=Y[0] 0:8\nL5 start op0 filled=A 0:1 0:8\nL6 retire op0\n"
            "L6 undefined Y[0] 0:8\nL7 compute reads=0 write=Y[0] 0:8\nL8 start op1 filled=A 0:1 0:8\n"
            "L9 start op2 filled=Y[0] 0:8\nL10 retire op1\nL11 retire op2\nend in_flight=0\n");
}

TEST(Stepper, AClippedCopyFillsTheLeadingCornerOfItsDestination) {
  EXPECT_EQ(run(R"(pipeline p:
    hbm A: f32[10, 128]
    sram X[1]: f32[16, 128]
    copy_in_start(A, X[0])
    copy_in_wait(X[0])
)"),
            "L4 start op0 filled=X[0] 0:10 0:128\nL5 retire op0\nend in_flight=0\n");
}

TEST(Stepper, LoopsBindTheirVariableInTheSharedEnv) {
  Program p = parse_program(R"(pipeline p:
    param N >= 1
    hbm A: f32[N, 8]
    sram X[2]: f32[8]
    for i in range(N):
        copy_in_start(A[i], X[i % 2])
        copy_in_wait(X[i % 2])
)");
  struct Loops : Quiet {
    std::vector<std::int64_t> seen;
    Env *env = nullptr;
    void on_iteration(const For &, std::int64_t v) override { seen.push_back(env->at("i") * 10 + v); }
  } c;
  Env env{{"N", 3}};
  c.env = &env;
  Stepper(p, p.body, env).run(c);
  EXPECT_EQ(c.seen, (std::vector<std::int64_t>{0, 11, 22}));
}

TEST(Stepper, AWhileLoopStopsAtItsFirstFailingCondition) {
  // bound=2**40: the loop runs twice; the iterations after do nothing and
  // are not walked (they took time linear in the bound).
  Program p = parse_program(R"(pipeline p:
    hbm A: f32[4, 8]
    sram X: f32[8]
    k = 0
    while k < 2, bound=2**40:
        k = k + 1
    copy_in_start(A[k], X)
    copy_in_wait(X)
)");
  struct Loops : Quiet {
    int iterations = 0;
    void on_iteration(const For &, std::int64_t) override { ++iterations; }
  } c;
  Env env;
  Stepper(p, p.body, env).run(c);
  EXPECT_EQ(c.iterations, 2);
  EXPECT_EQ(env.at("k"), 2);
}

TEST(Stepper, AReadInTheBranchAnIntegerWhereDropsIsNoRead) {
  // where(c, a, b) with c an integer: only the branch it selects is read
  // (`where(k == 0, init, acc[...])`); a condition on data selects nothing.
  EXPECT_EQ(run(R"(pipeline p:
    sram X[2]: f32[8]
    sram Y[2]: f32[8]
    for i in range(2):
        Y[0] = where(i == 0, X[0] * 0.0, X[1] + X[0])
        Y[1] = where(X[0] > 0.0, X[0], X[1])
)"),
            "L5 compute reads=1 write=Y[0] 0:8\n"
            "L6 compute reads=3 write=Y[1] 0:8\n"
            "L5 compute reads=2 write=Y[0] 0:8\n"
            "L6 compute reads=3 write=Y[1] 0:8\n"
            "end in_flight=0\n");
}

TEST(Stepper, ALoopRestoresAVariableItShadowsAndATensorLetUnbindsAnIntegerName) {
  // The stepper reads names through pointers into the env: a name rebound as
  // a tensor (erased) and then as an integer again, and a shadowed param,
  // must read as the env says at each step.
  Program p = parse_program(R"(pipeline p:
    param i >= 0
    hbm A: f32[8, 8]
    sram X[2]: f32[8]
    t = i + 1
    for i in range(2):
        copy_in_start(A[t + i], X[i])
        copy_in_wait(X[i])
        t = X[i] * 2
        t = 3
    copy_in_start(A[t + i], X[0])
    copy_in_wait(X[0])
)");
  struct Places : Quiet {
    std::vector<std::int64_t> rows;
    void on_start(const Stmt &, int, const AsyncStart &a) override {
      rows.push_back(a.src.place.box[0].first);
    }
  } c;
  Env env{{"i", 4}};
  Stepper(p, p.body, env).run(c);
  // t = 5 for i = 0; then t = 3 (after a tensor t) for i = 1; after the loop i = 4 again.
  EXPECT_EQ(c.rows, (std::vector<std::int64_t>{5, 4, 7}));
}

TEST(Stepper, AStoreOfUndefinedLeavesItsTargetUndefinedAndIsNoCompute) {
  EXPECT_EQ(run(R"(pipeline p:
    hbm A: f32[8]
    sram X[2]: f32[8]
    X[1, 2:6] = undefined
    X[0] = undefined
)"),
            "L4 undefined X[1] 2:6\n"
            "L5 undefined X[0] 0:8\n"
            "end in_flight=0\n");
}

TEST(Stepper, ACopyWhoseHbmWindowIsLargerThanItsSlotFaultsOutOfBounds) {
  const std::string text = "pipeline p:\n"
                           "    hbm  A: f32[128, 512]\n"
                           "    sram x[1]: f32[128, 256]\n"
                           "    for g in range(1):\n"
                           "        c = g + 1\n"
                           "        copy_in_start(A[0:128, 0:256 * c + 256], x[0])\n"
                           "        copy_in_wait(x[0])\n";
  const std::string events = run(text);
  EXPECT_NE(events.find("L6 out-of-bounds: copy between different shapes: A[0:128, 0:256 * c + 256] is "
                        "[128, 512] here, more than x[0] [128, 256] holds"),
            std::string::npos)
      << events;
}

TEST(Stepper, AComputeSliceWhoseSizeChangesBetweenIterationsIsAnError) {
  const std::string text = "pipeline p:\n"
                           "    sram X[1]: f32[8, 512]\n"
                           "    for g in range(2):\n"
                           "        c = (g + 1) * 128\n"
                           "        X[0, :, 0:c] = X[0, :, 0:c] + 1\n";
  try {
    run(text);
    ADD_FAILURE() << "no error";
  } catch (const StepError &e) {
    EXPECT_EQ(e.loc.line, 5);
    EXPECT_NE(std::string(e.what()).find("change from (128) to (256)"), std::string::npos) << e.what();
  }
  // A moving window of one size is fine.
  EXPECT_NO_THROW(run("pipeline p:\n    sram X[1]: f32[8, 512]\n    for g in range(2):\n"
                      "        X[0, :, g * 128:g * 128 + 128] = X[0, :, g * 128:g * 128 + 128] + 1\n"));
}

TEST(Stepper, AReadOfAPrefetchTablePastItsEndFaultsWhereTheLoweringLeftIt) {
  // The lowering writes tbl[s + 1] of an i32[3] table as a select over its
  // contents with the poison value outside: at s = 2 the read is made
  // (the select discards the value, not the load) and faults there.
  const std::string out = run(R"(pipeline p:
    hbm A: f32[4, 128]
    sram X[1]: f32[128]
    for s in range(3):
        b = where(s + 1 >= 0 and s + 1 < 3, where(s + 1 < 2, 1, 3), -2147483648)
        c = where(s < 2, b, 0)
        copy_in_start(A[c], X[0])
        copy_in_wait(X[0])
)");
  EXPECT_EQ(
      out,
      "L7 start op0 filled=X[0] 0:128\nL8 retire op0\n"
      "L7 start op1 filled=X[0] 0:128\nL8 retire op1\n"
      "L5 out-of-bounds: a read of a scalar-prefetch array outside it: its subscript 0 is 3, outside 0:3 "
      "(on a TPU the SMEM load takes whatever lies next to the table)\n");
}
