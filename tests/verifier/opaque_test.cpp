// An opaque op keeps its reads: the rules still see an uninitialized scratch
// it reads, the padding it may spread, and a kernel with one is never run.
#include "spec/parse.hpp"
#include "verifier/check.hpp"

#include "testing.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include <string>

using namespace pipecheck;
using verifier::Rule;
using verifier::Status;
using verifier::testing::has_finding;

namespace {

spec::KernelSpec kernel(const std::string &text) {
  auto r = spec::parse_and_validate(spec::SourceFile::from_string("k.pk", text));
  if (!r.file) {
    ADD_FAILURE() << r.errors.at(0).loc.line << ": " << r.errors.at(0).message;
    return {};
  }
  return std::get<spec::KernelSpec>(r.file->units.at(0));
}

// A reduction over k into a scratch accumulator, through an opaque op; line 10
// accumulates, line 12 writes the result out.
std::string accumulate(bool init) {
  return std::string(R"(kernel k:
    grid = (2, 4)
    dimension_semantics = (parallel, arbitrary)
    in  x: f32[256, 512]  block=(128, 128)  index=(i, k) -> (i, k)
    out o: f32[256, 128]  block=(128, 128)  index=(i, k) -> (i, 0)
    scratch acc: f32[128, 128]
    body:
)") +
         (init ? "        when program_id(1) == 0:\n            acc[...] = zeros\n"
               : "        o[...] = zeros\n        o[...] = zeros\n") +
         R"(        acc[...] += opaque(x[...], op=sinh, shape=(128, 128), dtype=f32)
        when program_id(1) == num_programs(1) - 1:
            o[...] = acc[...]
)";
}

} // namespace

TEST(OpaqueRules, AnAccumulatorAnOpaqueOpFeedsIsStillCheckedForItsInit) {
  const auto v = verifier::check(kernel(accumulate(false)), {});
  EXPECT_EQ(v.status, Status::violation);
  const bool either = std::any_of(v.findings.begin(), v.findings.end(), [](const auto &f) {
    return f.loc.line == 10 &&
           (f.rule == Rule::uninitialized_accumulator || f.rule == Rule::uninitialized_read);
  });
  EXPECT_TRUE(either) << v.reason;
}

TEST(OpaqueRules, AKernelWhoseRulesHoldOnTheEffectsIsVerifiedWithANote) {
  const auto v = verifier::check(kernel(accumulate(true)), {});
  EXPECT_EQ(v.status, Status::verified) << v.reason;
  EXPECT_NE(v.reason.find("its opaque ops (sinh at line 10) are checked on their reads and writes"),
            std::string::npos)
      << v.reason;
}

TEST(OpaqueRules, AnOpaqueOpThatReadsAnUninitializedScratchIsReportedAsAnyReadOfItIs) {
  auto text = [](const std::string &value) {
    return R"(kernel k:
    grid = (2,)
    in  x: f32[256, 128]  block=(128, 128)  index=(i) -> (i, 0)
    out o: f32[256, 128]  block=(128, 128)  index=(i) -> (i, 0)
    scratch s: f32[128, 128]
    body:
        o[...] = )" +
           value + "\n";
  };
  const auto opaque =
      verifier::check(kernel(text("opaque(x[...], s[...], op=erf_inv, shape=(128, 128), dtype=f32)")), {});
  const auto plain = verifier::check(kernel(text("x[...] + s[...]")), {});
  EXPECT_EQ(opaque.status, Status::violation);
  EXPECT_TRUE(has_finding(opaque, Rule::uninitialized_accumulator, 7)) << opaque.reason;
  ASSERT_EQ(opaque.findings.size(), plain.findings.size());
  for (std::size_t k = 0; k < plain.findings.size(); ++k) {
    EXPECT_EQ(opaque.findings[k].rule, plain.findings[k].rule);
    EXPECT_EQ(opaque.findings[k].message, plain.findings[k].message);
  }
}

TEST(OpaqueRules, AMaskComputedByAnOpaqueOpKeepsThePaddingOfAPartialBlock) {
  // x's last block is partial (200 = 128 + 72): a mask from iota keeps its
  // padding out of the sum; the same mask through an opaque op might not.
  auto text = [](const std::string &mask) {
    return R"(kernel k:
    grid = (2,)
    in  x: f32[200]  block=(128,)  index=(i) -> (i)
    out o: f32[2, 128]  block=(None, 128)  index=(i) -> (i, 0)
    body:
        m = )" +
           mask + R"(
        o[...] = broadcast_to(sum(where(m, x[...], 0)), (128,))
)";
  };
  const std::string exact = "iota((128,), 0) < 200 - program_id(0) * 128";
  EXPECT_EQ(verifier::check(kernel(text(exact)), {}).status, Status::verified);
  const auto v =
      verifier::check(kernel(text("opaque(" + exact + ", op=identity, shape=(128,), dtype=bool)")), {});
  EXPECT_NE(v.status, Status::verified) << v.reason;
}
