#pragma once
/// Check results of whole files and their renderings: clang-style text, the
/// JSON of docs/cli.md, SARIF 2.1.0 for code scanning and JUnit XML for CI.
/// One result model, every format rendered from it.

#include "reports/timeline.hpp"
#include "spec/diag.hpp"
#include "verifier/verdict.hpp"

#include <nlohmann/json.hpp>

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace pipecheck::reports {

/// The version every report and `--version` name.
inline constexpr const char *kToolVersion = "0.1.0";

/// One kernel's or pipeline's verdict.
struct UnitResult {
  std::string name;
  bool is_pipeline = false;
  spec::Loc loc;
  verifier::Verdict verdict;
  /// "kernel" or "pipeline".
  const char *kind() const { return is_pipeline ? "pipeline" : "kernel"; }
  /// HTML only (add_schedule): a kernel's pipeline timeline, or why it has
  /// none; the target it was checked for.
  std::optional<Timeline> timeline;
  std::string timeline_note;
  /// HTML only: the performance model in one line (perf::summary), or why
  /// there is none.
  std::string model_note;
  std::optional<std::string> target;
};

/// One checked file: its parse/validation errors, or one result per unit.
struct FileResult {
  spec::SourceFile source;
  std::vector<spec::Diagnostic> errors; ///< bad input: no units were checked
  std::vector<UnitResult> units;
};

/// The CLI contract's exit code: 3 bad input, else 1 any violation, else 2 any
/// unknown, else 0.
int exit_code(const std::vector<FileResult> &);

/// Counts over a set of results (a file's, or all of them).
struct Counts {
  int files = 0;
  int units = 0;
  int verified = 0;
  int violation = 0; ///< units with at least one finding
  int unknown = 0;
  int error = 0; ///< files with bad input
  int findings = 0;
  void add(const FileResult &);
};

enum class Format { text, json, sarif, junit, html };
/// "text", "json", "sarif", "junit" or "html"; nullopt for anything else.
std::optional<Format> parse_format(const std::string &);
/// The names parse_format accepts, for --help and usage errors.
inline constexpr const char *kFormatNames = "text, json, sarif, junit, html";

/// How text is written.
struct TextOptions {
  bool color = false; ///< ANSI colours, as clang does on a terminal
  bool quiet = false; ///< findings and errors only: no verified/unknown lines, no summaries
};

/// Clang-style text: each finding as `FILE:LINE:COL: error: message [rule]`
/// with its source line and a caret, then its `note:` lines (a note on a line
/// already shown for this finding shows no excerpt again); a line per
/// verified or unknown unit; with several files a summary line per file; a
/// closing total line.
void write_text(std::ostream &, const std::vector<FileResult> &, const TextOptions & = {});

/// One diagnostic (a bad-input error or a finding) the way write_text shows
/// it, notes and all.
void write_diagnostic(std::ostream &, const spec::SourceFile &, const spec::Diagnostic &,
                      const TextOptions &);

/// `{"tool": "pipecheck", "version": ..., "results": [...], "summary": {...}}`
/// as docs/cli.md describes it.
nlohmann::json to_json(const std::vector<FileResult> &);

/// The JSON of one finding's witness.
nlohmann::json to_json(const verifier::Witness &);

/// A SARIF 2.1.0 log with one run: the rule table as `tool.driver.rules`,
/// one result per finding (its location, the other locations of its notes as
/// `relatedLocations`, its witness trace as a `codeFlow`), unknown verdicts
/// and bad input as tool execution notifications. Paths under `cwd` become
/// URIs relative to it.
nlohmann::json to_sarif(const std::vector<FileResult> &, const std::string &cwd);

/// JUnit XML: a testsuite per file, a testcase per kernel or pipeline, a
/// `<failure>` with the findings as text for a violation, an `<error>` for an
/// unknown verdict and for a file with bad input.
std::string to_junit(const std::vector<FileResult> &);

/// Fills a kernel unit's timeline (the schedule its lowering runs, with the
/// bars of the first race trace among its findings marked) and target, for
/// the HTML report; `overrides` and `target` as the check used them.
void add_schedule(UnitResult &, const spec::KernelSpec &, const spec::Env &overrides,
                  const std::optional<std::string> &target);

/// One self-contained HTML page (inline CSS, SVG and script; nothing
/// fetched): a summary table (file, unit, verdict, rules, time), then per
/// unit its findings with source excerpts, notes and witness, its SRAM
/// footprint against the target's budget and its pipeline timeline. A script
/// on the page counts what rendered into `data-rows` / `data-bars` of <body>.
std::string to_html(const std::vector<FileResult> &);

/// Text for XML (an attribute value or element content): the five escapes;
/// control bytes and invalid UTF-8, which XML 1.0 cannot hold, become '?'.
std::string xml_text(const std::string &);

/// The report in a format, as written to standard output or `-o`. `cwd` is
/// the directory SARIF URIs are relative to.
std::string render(Format, const std::vector<FileResult> &, const TextOptions &, const std::string &cwd);

} // namespace pipecheck::reports
