#include "verifier/rule.hpp"

#include <array>
#include <cassert>

namespace pipecheck::verifier {

namespace {

using enum Rule;

// The only place rule ids are spelled. docs/rules.md has one section per
// entry (tests/verifier/rule_test.cpp checks both ways).
constexpr std::array<RuleInfo, 22> kRules = {{
    {reduction_not_last_axis, "reduction-not-last-axis", RuleScope::spec,
     "an output is accumulated along a grid axis followed by an axis its index_map depends on",
     "docs/rules.md#reduction-not-last-axis"},
    {output_revisit, "output-revisit", RuleScope::spec, "an output block is revisited non-consecutively",
     "docs/rules.md#output-revisit"},
    {uninitialized_accumulator, "uninitialized-accumulator", RuleScope::spec,
     "the body reads an output or scratch block before anything wrote it",
     "docs/rules.md#uninitialized-accumulator"},
    {accumulator_reset, "accumulator-reset", RuleScope::spec,
     "the init write fires again on a later visit, discarding the partial result",
     "docs/rules.md#accumulator-reset"},
    {accumulator_carried, "accumulator-carried", RuleScope::spec,
     "a scratch accumulator stores into an output block what it accumulated for another block",
     "docs/rules.md#accumulator-carried"},
    {accumulation_lost, "accumulation-lost", RuleScope::spec,
     "an output is stored from a scratch accumulator before its reduction ends: the last updates are lost",
     "docs/rules.md#accumulation-lost"},
    {input_write_lost, "input-write-lost", RuleScope::spec,
     "the body writes an input block, aliased or not: the write never reaches HBM",
     "docs/rules.md#input-write-lost"},
    {output_write_lost, "output-write-lost", RuleScope::spec,
     "the body stores an output block where nothing copies it out: on Mosaic GPU a step whose slot "
     "is never copied out, on TPU a store the next step of the visit overwrites",
     "docs/rules.md#output-write-lost"},
    {index_out_of_bounds, "index-out-of-bounds", RuleScope::both,
     "a block index or a ref's subscript lies outside its array, buffer or ring",
     "docs/rules.md#index-out-of-bounds"},
    {partial_block_reduction, "partial-block-reduction", RuleScope::spec,
     "a reduced dimension is not a multiple of its block: padding enters the reduction",
     "docs/rules.md#partial-block-reduction"},
    {parallel_write_conflict, "parallel-write-conflict", RuleScope::spec,
     "grid points differing along a parallel axis write the same output block or any-space region, or share "
     "a "
     "scratch value",
     "docs/rules.md#parallel-write-conflict"},
    {output_not_covered, "output-not-covered", RuleScope::spec,
     "some elements of an output no alias covers are never written", "docs/rules.md#output-not-covered"},
    {alias_hazard, "alias-hazard", RuleScope::spec,
     "an aliased input block is read after its output twin was written back", "docs/rules.md#alias-hazard"},
    {sram_capacity, "sram-capacity", RuleScope::spec,
     "the buffers and scratch exceed the target's VMEM/SMEM budget", "docs/rules.md#sram-capacity"},
    {block_tiling, "block-tiling", RuleScope::spec, "the block violates the target's tiling rule",
     "docs/rules.md#block-tiling"},
    {any_space_access, "any-space-access", RuleScope::spec,
     "the body loads or stores an operand left in HBM (memory_space=any|hbm): only DMAs may touch it",
     "docs/rules.md#any-space-access"},
    {slot_race, "slot-race", RuleScope::program,
     "two accesses to one slot or HBM region, one a write, unordered by happens-before",
     "docs/rules.md#slot-race"},
    {async_operand_overwritten, "async-operand-overwritten", RuleScope::program,
     "a copy overwrites a slot an asynchronous consumer (wgmma) still reads",
     "docs/rules.md#async-operand-overwritten"},
    {wait_without_copy, "wait-without-copy", RuleScope::program,
     "a wait with no matching outstanding operation: a hang", "docs/rules.md#wait-without-copy"},
    {copy_never_waited, "copy-never-waited", RuleScope::program,
     "an operation is still outstanding when the program ends", "docs/rules.md#copy-never-waited"},
    {stale_read, "stale-read", RuleScope::program,
     "the body reads a slot holding a different block than it indexes", "docs/rules.md#stale-read"},
    {uninitialized_read, "uninitialized-read", RuleScope::program,
     "a read of a slot or buffer that nothing has written", "docs/rules.md#uninitialized-read"},
}};

constexpr bool in_enum_order() {
  for (std::size_t i = 0; i < kRules.size(); ++i)
    if (static_cast<std::size_t>(kRules[i].rule) != i) return false;
  return true;
}
static_assert(in_enum_order(), "kRules must list every Rule once, in enum order");
static_assert(static_cast<std::size_t>(uninitialized_read) + 1 == kRules.size(),
              "a Rule is missing from kRules");

} // namespace

std::span<const RuleInfo> rule_table() { return kRules; }

const RuleInfo &info(Rule r) {
  const auto i = static_cast<std::size_t>(r);
  assert(i < kRules.size());
  return kRules[i];
}

std::string_view id(Rule r) { return info(r).id; }

std::optional<Rule> find_rule(std::string_view s) {
  for (const auto &r : kRules)
    if (r.id == s) return r.rule;
  return std::nullopt;
}

bool checks_kernels(Rule r) { return info(r).scope != RuleScope::program; }
bool checks_programs(Rule r) { return info(r).scope != RuleScope::spec; }

std::string to_string(Rule r) { return std::string(id(r)); }

std::ostream &operator<<(std::ostream &os, Rule r) { return os << id(r); }

} // namespace pipecheck::verifier
