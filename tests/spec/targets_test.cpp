#include "spec/targets.hpp"

#include "spec/parse.hpp"

#include <gtest/gtest.h>

#include <set>

namespace pipecheck::spec {
namespace {

KernelSpec kernel(const std::string &settings) {
  auto r = parse_and_validate(SourceFile::from_string(
      "k.pk", "kernel k:\n" + settings + "    out o: f32[8]\n    body:\n        o[...] = zeros\n"));
  EXPECT_TRUE(r.file) << (r.errors.empty() ? "" : r.errors.front().message);
  return std::get<KernelSpec>(r.file->units.at(0));
}

TEST(Targets, TheTableKnowsEachTargetsKindAndMemoryOnce) {
  std::set<std::string> names;
  for (const auto &t : targets()) {
    EXPECT_TRUE(names.insert(t.name).second) << t.name << " listed twice";
    EXPECT_GT(t.default_sram_bytes, 0) << t.name;
    EXPECT_GE(t.physical_sram_bytes, t.default_sram_bytes) << t.name;
    EXPECT_EQ(find_target(t.name), &t);
  }
  EXPECT_EQ(find_target("h200")->kind, TargetKind::gpu);
  EXPECT_EQ(find_target("tpu_v5e")->kind, TargetKind::tpu);
  EXPECT_EQ(find_target("h100x"), nullptr) << "names match exactly, not by prefix";
}

TEST(Targets, AnUnknownTargetMessageListsEveryKnownOne) {
  std::string m = unknown_target_message("tpu_v9");
  EXPECT_EQ(m.rfind("unknown target 'tpu_v9'; expected one of ", 0), 0u) << m;
  for (const auto &t : targets())
    EXPECT_NE(m.find(t.name), std::string::npos) << m;
}

TEST(Targets, AKernelsTargetIsTheOverrideElseItsSetting) {
  KernelSpec plain = kernel("");
  KernelSpec gpu = kernel("    target = h100\n");
  EXPECT_EQ(kernel_target(plain, std::nullopt), std::nullopt);
  EXPECT_EQ(kernel_target(gpu, std::nullopt), "h100");
  EXPECT_EQ(kernel_target(gpu, std::string("tpu_v4")), "tpu_v4");
  EXPECT_TRUE(targets_gpu(gpu, std::nullopt));
  EXPECT_FALSE(targets_gpu(gpu, std::string("tpu_v4")));
  EXPECT_TRUE(targets_gpu(plain, std::string("h200")));
  EXPECT_FALSE(targets_gpu(plain, std::nullopt));
}

TEST(Targets, ValidationRejectsAnUnknownTargetAtItsNameListingTheKnownOnes) {
  auto r = parse_and_validate(SourceFile::from_string(
      "k.pk", "kernel k:\n    target = tpu_v9\n    out o: f32[8]\n    body:\n        o[...] = zeros\n"));
  ASSERT_FALSE(r.errors.empty());
  EXPECT_EQ(r.errors.front().loc.line, 2);
  EXPECT_EQ(r.errors.front().loc.col, 14);
  EXPECT_EQ(r.errors.front().message, unknown_target_message("tpu_v9"));
}

} // namespace
} // namespace pipecheck::spec
