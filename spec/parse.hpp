#pragma once
/// The `.pk` lexer and parser.

#include "spec/diag.hpp"
#include "spec/ir.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace pipecheck::spec {

struct ParseResult {
  std::optional<File> file;       ///< set when there are no errors
  std::vector<Diagnostic> errors; ///< the first syntax error (parsing stops there)
};

/// Parses a whole file. Never throws; bad input yields a located error.
/// Nesting deeper than 64 blocks or 200 expression levels is an error.
ParseResult parse(const SourceFile &);

/// What a PrefetchLoader read: the elements of an integer array in C order
/// and its shape, or why not.
struct LoadedContents {
  std::optional<std::vector<std::int64_t>> values;
  std::vector<std::int64_t> shape;
  std::string error; ///< why there are no values ("cannot open file: ...")
};

/// Reads the contents of a `prefetch NAME: i32[n] from "FILE"`, given the
/// path resolved against the .pk's folder. The spec library reads no files:
/// the CLI passes executor::load_prefetch_npy.
using PrefetchLoader = std::function<LoadedContents(const std::string &path)>;

/// Loads every `from "FILE"` of the file's kernels into that prefetch's
/// given contents (`values`, located at the file name, so that a length or
/// a constraint they break is reported there). FILE is relative to the
/// folder of `pk_path` (the current folder for standard input) unless
/// absolute. A file that cannot be read, or no loader, is a located error.
std::vector<Diagnostic> load_prefetch_files(File &, const std::string &pk_path, const PrefetchLoader &);

/// Parses, loads prefetch files with `load` and validates
/// (spec/validate.hpp): a File only when all succeed.
ParseResult parse_and_validate(const SourceFile &, const PrefetchLoader &load = {});

} // namespace pipecheck::spec
