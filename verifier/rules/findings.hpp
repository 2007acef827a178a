#pragma once
/// Findings of the spec-level rules, shared by the symbolic checker and the
/// brute-force enumerator so both speak with the same words and witnesses.

#include "verifier/rules/model.hpp"
#include "verifier/verdict.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pipecheck::verifier::rules {

using Point = std::vector<std::int64_t>;

/// The block index of operand `op` at grid point `p` (concrete evaluation), or
/// nullopt when an index expression cannot be evaluated.
std::optional<Point> block_at(const KernelModel &, std::size_t op, const Point &p);
/// Whether every guard of the effect holds at `p` (nullopt: not evaluable).
std::optional<bool> guard_at(const KernelModel &, const Effect &, const Point &p);

/// The arithmetic error (an integer overflow, a division by zero) evaluating
/// the index map of `op` at grid point `p` hits, as bad input located at the
/// operator and naming the point; nullopt when it evaluates or is merely unknown.
std::optional<spec::Diagnostic> index_error_at(const KernelModel &, std::size_t op, const Point &p);
/// The same for the guards of an effect.
std::optional<spec::Diagnostic> guard_error_at(const KernelModel &, const Effect &, const Point &p);
/// The first such error of any windowed operand's index map at a grid point
/// the finding's witness names (Z3 integers are unbounded: a witness can lie
/// where int64 evaluation overflows).
std::optional<spec::Diagnostic> witness_error(const KernelModel &, const Finding &);

Finding revisit_finding(const KernelModel &, std::size_t op, bool accumulated, const Point &first,
                        const Point &revisit);
Finding uninitialized_finding(const KernelModel &, const Effect &read, const Point &p);
Finding reset_finding(const KernelModel &, const Effect &init, const Point &partial, const Point &reset);
Finding input_write_finding(const KernelModel &, const Effect &write, const Point &p);
Finding out_of_bounds_finding(const KernelModel &, std::size_t op, const Point &p);
Finding parallel_conflict_finding(const KernelModel &, std::size_t op, const Point &p, const Point &q);
Finding not_covered_finding(const KernelModel &, std::size_t op, const Point &block);
Finding alias_finding(const KernelModel &, const AliasModel &, const Point &written, const Point &read);

/// The rules that need no grid reasoning: partial-block-reduction,
/// sram-capacity and block-tiling (the last two only with a known target).
/// Appends to `unknown` when the target is named but not known.
std::vector<Finding> structural_findings(const KernelModel &, std::vector<std::string> &unknown);

/// How the body uses a scratch buffer, for accumulator-reset (indices into
/// KernelModel::effects, in program order). A statement whose store of the
/// scratch also reads it (`acc[...] += v`, `acc[...] = acc[...] * a + v`) is
/// an update; a plain `=` store that does not read it is an init; a read by
/// any other statement consumes the partial result (the effect summary does not
/// follow values through locals, so every such read counts, whatever it feeds).
struct ScratchUse {
  std::vector<std::size_t> inits;
  std::vector<std::size_t> accumulates;
  std::vector<std::size_t> consumes;
};
ScratchUse scratch_use(const KernelModel &, std::size_t op);

/// The SRAM footprint as Pallas allocates it. TPU: per windowed operand
/// buffer_count x block bytes. Mosaic GPU (per CTA): per windowed operand,
/// outputs included, gpu_slots() x block bytes. Plus scratch in VMEM/SMEM; a
/// `memory_space=acc` scratch lives in registers and counts nothing. A lower
/// bound: the compiler adds intermediates and spills.
std::int64_t sram_bytes(const KernelModel &);

/// Mosaic GPU: the SMEM slots per windowed operand, max_concurrent_steps
/// clipped to one CTA's pipeline steps (as emit_pipeline clips it).
std::int64_t gpu_slots(const KernelModel &);

/// One root cause, one finding: drops output-revisit where
/// reduction-not-last-axis holds for the same operand, keeps one finding per
/// (rule, anchor line) — the one with the smallest witness — and sorts by line.
void finalize(std::vector<Finding> &);

/// The values of a witness concatenated (for "smallest witness" comparisons).
std::vector<std::int64_t> witness_key(const Witness &);

} // namespace pipecheck::verifier::rules
