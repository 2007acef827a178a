#pragma once
/// A failing property or fuzz case as a corpus file: the unit's `.pk` text
/// with its `# expect:` comments (what it should check as) and a header that
/// says where it came from, so that once the bug is fixed it stays fixed.

#include "spec/ir.hpp"
#include "sweep/sweep.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pipecheck::sweep {

/// `text` with `# expect: WHAT` appended to each line named in `expect`
/// (1-based lines of `text`; WHAT is a rule id or "verified"), `# expect-run:
/// fail` on the unit's first line when `run_fails`, and `header` as comment
/// lines before it.
std::string failure_file_text(const std::string &text, const std::vector<std::pair<int, std::string>> &expect,
                              bool run_fails, const std::string &header);

/// Writes failure_file_text(...) to DIR/NAME-HASH.pk, DIR being `dir` or else
/// the environment's PIPECHECK_PROPERTY_SAVE (created if missing), HASH the
/// FNV-1a of `text` (one file per distinct case). Returns its path; nullopt
/// when no directory is given or the file cannot be written.
std::optional<std::string> save_failure(const std::string &name, const std::string &text,
                                        const std::vector<std::pair<int, std::string>> &expect,
                                        bool run_fails, const std::string &header,
                                        const std::optional<std::string> &dir = {});

/// The kernel `k` at one configuration: each param in `params` fixed to its
/// value, its domain dropped; printed canonically without the source's
/// `# expect` comments (they described the whole sweep).
std::string config_kernel_text(const spec::KernelSpec &k, const spec::Env &params);

/// `fuzz --save-failures DIR`: the configuration `c` of `k` as a corpus file
/// DIR/KERNEL-HASH.pk whose `# expect:` comments say what checking it shows
/// now (each finding's rule at its line, or `verified`), with `# expect-run:
/// fail` when its run failed. Returns the path; nullopt when the file
/// cannot be written (or the fixed kernel does not parse).
std::optional<std::string> save_config_failure(const spec::KernelSpec &k, const ConfigResult &c,
                                               const SweepOptions &o, const std::string &dir);

} // namespace pipecheck::sweep
