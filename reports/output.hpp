#pragma once
/// Writing a command's output file (`-o`) so that no reader ever sees a
/// partial file or a mix of two writers' reports.

#include <string>

namespace pipecheck::reports {

/// Writes `text` to `path`: into a fresh temporary file in the same directory,
/// flushed and closed, then renamed over `path` (rename is atomic within a
/// file system, so concurrent writers leave one whole report: the last
/// one). A `path` that exists and is not a regular file (/dev/stdout,
/// /dev/full, a pipe) cannot be replaced and is written directly. Returns ""
/// on success, else why the write failed ("No space left on device", ...);
/// on failure no temporary file is left behind.
std::string write_file_atomically(const std::string &path, const std::string &text);

/// Writes all of `text` to an open file descriptor (e.g. 1 for standard
/// output); "" on success, else why ("cannot write: No space left on device").
std::string write_to_fd(int fd, const std::string &text);

} // namespace pipecheck::reports
