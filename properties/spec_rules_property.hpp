#pragma once
/// The spec-rule property: on random small kernels the symbolic checker and
/// the brute-force enumerator agree, and every symbolic witness is real.

#include <rapidcheck.h>

#include <string>

namespace pipecheck::properties {

/// Random small kernel specs as `.pk` text (kernel name `k`): grids of rank
/// 1-3 with extents 1-4, 2-D operands with ragged shapes, index maps with
/// `//`, `%`, offsets and transposes, guarded inits, input writes, aliases.
rc::Gen<std::string> small_kernel_text();

/// Checks the kernel in `text` both ways. Returns an empty string when the
/// verdicts agree (same rule, anchor line and witness for every finding) and
/// every symbolic witness holds concretely; otherwise what differs. Returns
/// "skip" when the text does not validate.
std::string compare_symbolic_with_enumeration(const std::string &text);

} // namespace pipecheck::properties
