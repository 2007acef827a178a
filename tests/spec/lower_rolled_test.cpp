// The rolled lowering (a loop over the grid steps carrying the scheduler's
// state) against the unrolled one (literal slots and regions per step): the
// same schedule, held equal event by event through the one Program stepper.
#include "spec/bind.hpp"
#include "spec/eval.hpp"
#include "spec/lower.hpp"

#include "spec/parse.hpp"
#include "spec/print.hpp"
#include "spec/step.hpp"
#include "tests/corpus/corpus_files.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace pipecheck::spec;

namespace {

std::optional<Lowered> lower_text(const KernelSpec &k, bool unroll, std::string *why = nullptr) {
  LowerOptions o;
  o.unroll = unroll;
  std::vector<Diagnostic> errs;
  auto l = lower(k, o, errs);
  if (!l && why) *why = errs.empty() ? "?" : errs[0].message;
  return l;
}

KernelSpec kernel(const std::string &text) {
  auto r = parse_and_validate(SourceFile::from_string("k.pk", text));
  if (!r.file) {
    ADD_FAILURE() << r.errors[0].loc.line << ": " << r.errors[0].message << "\n" << text;
    return {};
  }
  return std::get<KernelSpec>(r.file->units.at(0));
}

std::string box(const StepPlace &p) {
  std::ostringstream os;
  os << p.buffer << "/" << p.slot;
  for (auto &[lo, hi] : p.box)
    os << "[" << lo << ":" << hi << ")";
  return os.str();
}

/// Every event of a run, printed with its resolved places and grid step;
/// waits that retire nothing on a wgmma_wait are no events (the rolled form
/// waits where a wgmma may be in flight).
class Recorder : public StepConsumer {
public:
  Recorder(const Lowered &l, const Stepper *&st) : l_(l), st_(st) {}
  std::vector<std::string> events;
  void on_compute(const Stmt &, const std::vector<StepRef> &reads,
                  const std::optional<StepRef> &write) override {
    std::string e = step() + " compute";
    for (auto &r : reads)
      e += " r" + box(r.place);
    if (write) e += " w" + box(write->place);
    events.push_back(e);
  }
  void on_start(const Stmt &, int op, const AsyncStart &a) override {
    events.push_back(step() + " start" + std::to_string(static_cast<int>(a.kind)) + " #" +
                     std::to_string(op) + " " + box(a.src_read) + " -> " + box(a.dst_filled) + " " +
                     box(a.acc.place) + box(a.a.place) + box(a.b.place));
  }
  void on_wait(const Stmt &, const std::optional<StepRef> &waited, const std::vector<int> &retired) override {
    if (!waited && retired.empty()) return;
    std::string e = step() + " wait";
    for (int r : retired)
      e += " #" + std::to_string(r);
    events.push_back(e);
  }
  void on_undefined(const Stmt &, const StepPlace &p) override {
    events.push_back(step() + " undef " + box(p));
  }
  void on_fault(const Stmt &, FaultKind k, const std::string &m) override {
    // The message quotes the ref as written (literal or in the state); what
    // it resolved to follows the quote.
    auto q = m.find("': ");
    events.push_back(step() + " fault" + std::to_string(static_cast<int>(k)) + " " +
                     (q == std::string::npos ? m : m.substr(q + 3)));
  }
  void on_end(const std::vector<int> &in_flight) override {
    events.push_back("end " + std::to_string(in_flight.size()));
  }

private:
  std::string step() {
    const Stmt *cur = st_->current();
    int top = -1;
    for (std::size_t i = 0; i < l_.program.body.size(); ++i)
      if (contains(l_.program.body[i], cur)) top = static_cast<int>(i);
    return "@" + std::to_string(l_.step(top, st_->loop_values()));
  }
  static bool contains(const Stmt &s, const Stmt *p) {
    if (&s == p) return true;
    if (auto *i = std::get_if<If>(&s.kind)) {
      for (auto &t : i->then_body)
        if (contains(t, p)) return true;
      for (auto &t : i->else_body)
        if (contains(t, p)) return true;
    }
    if (auto *f = std::get_if<For>(&s.kind))
      for (auto &t : f->body)
        if (contains(t, p)) return true;
    return false;
  }
  const Lowered &l_;
  const Stepper *&st_;
};

std::vector<std::string> events(const Lowered &l) {
  Env env;
  const Stepper *sp = nullptr;
  Recorder r(l, sp);
  Stepper st(l.program, l.program.body, env);
  sp = &st;
  st.run(r);
  return r.events;
}

/// Lowers `k` both ways and compares their events; returns false when the
/// kernel does not lower (both forms must then refuse it alike).
bool expect_same_schedule(const KernelSpec &k, const std::string &what) {
  std::string why_u, why_r;
  auto u = lower_text(k, true, &why_u), r = lower_text(k, false, &why_r);
  EXPECT_EQ(u.has_value(), r.has_value()) << what << ": " << why_u << " / " << why_r;
  if (!u || !r) return false;
  auto eu = events(*u), er = events(*r);
  std::size_t i = 0;
  while (i < eu.size() && i < er.size() && eu[i] == er[i])
    ++i;
  // A read of a prefetch table past its end: the rolled form reads it at run
  // time and faults there; the unrolled one decided it at lowering time (a
  // `when`, a while condition, a block index) from the poison value. The two
  // agree up to that read, where the kernel is wrong already (check's spec
  // rules and run's oracle report it at the read).
  if (i < er.size() && i < eu.size() &&
      er[i].find("a read of a scalar-prefetch array outside it") != std::string::npos)
    return true;
  EXPECT_TRUE(i == eu.size() && i == er.size())
      << what << "\nfirst difference at event " << i
      << ":\n  unrolled: " << (i < eu.size() ? eu[i] : "(none)")
      << "\n  rolled:   " << (i < er.size() ? er[i] : "(none)") << "\n--- rolled:\n"
      << print(r->program);
  auto back = parse(SourceFile::from_string("lowered.pk", print(r->program)));
  EXPECT_TRUE(back.file && std::get<Program>(back.file->units.at(0)) == r->program) << what;
  return true;
}

} // namespace

// In shards of the corpus: minutes under ASan when whole, and one test.
class LowerRolledShard : public ::testing::TestWithParam<int> {};
constexpr int kLowerRolledShards = 4;

TEST_P(LowerRolledShard, RunsTheSameScheduleAsTheUnrolledFormOnEveryCorpusKernel) {
  int compared = 0;
  for (const auto &rel : pipecheck::testing_corpus::corpus_shard(GetParam(), kLowerRolledShards)) {
    const std::string path = std::string(PIPECHECK_SOURCE_DIR) + "/" + rel;
    auto r = parse_and_validate(SourceFile::from_string(path, pipecheck::testing_corpus::read(path)));
    if (!r.file) continue;
    for (auto &u : r.file->units)
      if (auto *k = std::get_if<KernelSpec>(&u)) {
        // (The corpus' grids over the enumerator's 4096 points are there for
        // the solver; unrolled, each takes seconds, minutes under ASan. The
        // grid sizes do not matter to the rolled form: ItsSizeDoesNotDependOnTheGrid.)
        // (Counted from the grid itself: a kernel that does not bind, as a
        // prefetch-indexed one here, is skipped by its size all the same.)
        const Binding b = bind_kernel(*k, param_env(k->params));
        if ((b.kernel && b.kernel->num_points() > 4096) || pipecheck::testing_corpus::grid_points(*k) > 4096)
          continue;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
        // (The unrolled form reads a prefetch table through a where-tree of
        // its contents at every read: the GPU paged attention's 640-entry
        // block table takes 5 minutes under ASan, 30 s without, where the
        // release run compares it.)
        std::int64_t entries = 0;
        for (const auto &pf : k->prefetches)
          entries += eval_int(pf.length, param_env(k->params)).value_or(0);
        if (entries > 256) continue;
#endif
        if (expect_same_schedule(*k, std::filesystem::path(rel).filename().string() + ":" + k->name))
          ++compared;
      }
  }
  EXPECT_GT(compared, 40 / kLowerRolledShards); // (over 40 in all)
}

INSTANTIATE_TEST_SUITE_P(Corpus, LowerRolledShard, ::testing::Range(0, kLowerRolledShards));

TEST(LowerRolled, RunsTheSameScheduleOnGridsOfRankOneToFourWithRaggedAndSqueezedBlocks) {
  const char *grids[] = {"(5,)", "(1,)", "(3, 2)", "(2, 1, 3)", "(2, 2, 1, 2)"};
  const char *maps[] = {"(0, 0)", "(a0, 0)", "(0, a_last)", "(a_last, a0)", "(a0 // 2, a_last)"};
  for (const char *g : grids)
    for (const char *m : maps)
      for (int bufs : {1, 2, 3})
        for (bool gpu : {false, true}) {
          std::string grid = g;
          int rank = static_cast<int>(std::count(grid.begin(), grid.end(), ',')) +
                     (grid.back() == ')' && grid[grid.size() - 2] == ',' ? 0 : 1);
          std::string params;
          for (int a = 0; a < rank; ++a)
            params += (a ? ", a" : "a") + std::to_string(a);
          std::string map = m;
          auto replace = [&](const std::string &from, const std::string &to) {
            for (std::size_t p = map.find(from); p != std::string::npos; p = map.find(from, p + to.size()))
              map.replace(p, from.size(), to);
          };
          replace("a_last", "a" + std::to_string(rank - 1));
          std::string sem;
          if (gpu) {
            sem = "    target = h200\n    max_concurrent_steps = " + std::to_string(bufs) +
                  "\n    dimension_semantics = (";
            for (int a = 0; a < rank; ++a)
              sem += std::string(a ? ", " : "") + (a == 0 && rank > 1 ? "parallel" : "arbitrary");
            sem += ")\n";
          }
          std::string text = "kernel k:\n    grid = " + grid + "\n" + sem +
                             "    in  x: f32[40, 300]  block=(16, 128)  index=(" + params + ") -> " + map +
                             (gpu ? "" : "  buffered=" + std::to_string(bufs)) +
                             "\n    in  y: f32[8, 4, 128]  block=(None, 4, 128)  index=(" + params +
                             ") -> (a0, 0, 0)\n    out o: f32[40, 300]  block=(16, 128)  index=(" + params +
                             ") -> " + map + "\n    body:\n        o[...] = x[...] + 1\n";
          expect_same_schedule(kernel(text), text);
        }
}

TEST(LowerRolled, ItsSizeDoesNotDependOnTheGrid) {
  auto text = [](int g) {
    return "kernel s:\n    grid = (" + std::to_string(g) + ", 4)\n" + "    in  x: f32[" +
           std::to_string(128 * g) + ", 512]  block=(128, 128)  index=(i, k) -> (i, k)\n" +
           "    out o: f32[" + std::to_string(128 * g) +
           ", 128]  block=(128, 128)  index=(i, k) -> (i, 0)\n" +
           "    body:\n        when program_id(1) == 0:\n            o[...] = zeros\n        o[...] += "
           "x[...]\n";
  };
  auto small = lower_text(kernel(text(2)), false), big = lower_text(kernel(text(1 << 18)), false);
  ASSERT_TRUE(small && big);
  auto lines = [](const Program &p) {
    auto s = print(p);
    return std::count(s.begin(), s.end(), '\n');
  };
  EXPECT_EQ(lines(small->program), lines(big->program));
  EXPECT_EQ(big->main_loop >= 0, true);
}

TEST(LowerRolled, BlockIndicesAreEvaluatedAtEveryStepUpToALimitAndANotePastIt) {
  // The block index divides by zero at grid step 10 of 16.
  const KernelSpec k = kernel("kernel s:\n    grid = (16,)\n"
                              "    in  x: f32[128, 128]  block=(8, 128)  index=(i) -> (15 // (i - 10), 0)\n"
                              "    out o: f32[128, 128]  block=(8, 128)  index=(i) -> (i, 0)\n"
                              "    body:\n        o[...] = x[...]\n");
  LowerOptions o;
  std::vector<Diagnostic> errs;
  EXPECT_FALSE(lower(k, o, errs));
  ASSERT_FALSE(errs.empty());
  // Past the limit the walk is skipped, and the note says so.
  o.check_blocks_max_steps = 15;
  errs.clear();
  auto l = lower(k, o, errs);
  ASSERT_TRUE(l) << (errs.empty() ? "" : errs[0].message);
  EXPECT_NE(l->note.find("not evaluated at each of the 16 grid steps (more than 15)"), std::string::npos)
      << l->note;
  o.check_blocks_max_steps = 16;
  errs.clear();
  EXPECT_FALSE(lower(k, o, errs));
}

TEST(LowerRolled, AStepOfTheMainLoopIsItsIterationAndThePrologueAndEpilogueAreTheFirstAndLastSteps) {
  auto l = lower_text(kernel(R"(kernel s:
    grid = (2, 3)
    in  x: f32[16, 384]  block=(8, 128)  index=(i, j) -> (i, j)
    out o: f32[16, 384]  block=(8, 128)  index=(i, j) -> (i, j)
    body:
        o[...] = x[...]
)"),
                      false);
  ASSERT_TRUE(l);
  ASSERT_GE(l->main_loop, 1);
  EXPECT_EQ(l->step(0, {}), 0);
  EXPECT_EQ(l->step(l->main_loop, {4}), 4);
  EXPECT_EQ(l->step(l->main_loop + 1, {}), 5);
  EXPECT_EQ(l->point(4), (std::vector<std::int64_t>{1, 1}));
}

TEST(LowerRolled, LookaheadAndRevisitAnyAreLoweredUnrolledWithTheReasonPastTheLimit) {
  auto k = kernel(R"(kernel f:
    grid = (70000,)
    in  x: f32[70000, 128]  block=(1, 128)  index=(i) -> (i, 0)  buffered=(2, lookahead)
    out o: f32[70000, 128]  block=(1, 128)  index=(i) -> (i, 0)
    body:
        o[...] = x[...]
)");
  std::string why;
  EXPECT_FALSE(lower_text(k, false, &why));
  EXPECT_NE(why.find("lookahead"), std::string::npos) << why;
}

TEST(LowerRolled, RunsTheSameScheduleOnElementDimsWhoseWindowsReachTheLowAndHighPadding) {
  // 1-D and 2-D Element windows, padded at either end or both, read and
  // written, placed by index maps that start in the low padding, cross it,
  // step by more or less than the block, or stay put.
  struct Case {
    const char *grid, *shape, *block, *map;
  };
  const Case cases[] = {
      {"(8,)", "[64]", "(Element(10, (1, 1)),)", "(i * 8,)"},
      {"(8,)", "[64]", "(Element(12, (3, 1)),)", "(i * 8,)"},
      {"(5,)", "[40]", "(Element(16, (8, 0)),)", "(i * 8,)"},
      {"(6,)", "[40]", "(Element(8, (4, 4)),)", "(i * 8,)"},
      {"(4,)", "[20]", "(Element(24, (2, 2)),)", "(0,)"},
      {"(4,)", "[20]", "(Element(6, (5, 0)),)", "(i,)"},
      {"(3, 4)", "[24, 32]", "(Element(10, (1, 1)), Element(10, (2, 0)))", "(i * 8, j * 8)"},
      {"(3, 4)", "[3, 32]", "(None, Element(12, (4, 4)))", "(i, j * 8)"},
  };
  int offsets = 0;
  for (const auto &c : cases)
    for (int bufs : {1, 2, 3})
      for (bool out : {false, true}) {
        const bool two = std::string(c.grid).find(',') < std::string(c.grid).size() - 2;
        const std::string params = two ? "(i, j)" : "(i)";
        const std::string e =
            std::string("f32") + c.shape + "  block=" + c.block + "  index=" + params + " -> " + c.map;
        std::string text = std::string("kernel k:\n    grid = ") + c.grid + "\n";
        if (out)
          text += "    out o: " + e + "\n    body:\n        o[...] = zeros\n";
        else
          text += "    in  x: " + e + "  buffered=" + std::to_string(bufs) +
                  "\n    out o: f32[1]  block=(1,)  index=" + params +
                  " -> (0,)\n    body:\n        o[...] = zeros\n";
        KernelSpec k = kernel(text);
        ASSERT_TRUE(expect_same_schedule(k, text)) << text;
        auto u = lower_text(k, true);
        ASSERT_TRUE(u);
        const std::string printed = print(u->program);
        for (std::size_t p = printed.find("offset="); p != std::string::npos;
             p = printed.find("offset=", p + 1))
          ++offsets;
      }
  EXPECT_GT(offsets, 40);
}
