#include "reports/output.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace pipecheck::reports {
namespace {

std::string why(const std::string &what, int err = errno) { return what + ": " + std::strerror(err); }

// "" or why: writes all of `text`, retrying short writes and EINTR.
std::string write_all(int fd, const std::string &text) {
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return why("cannot write");
    done += static_cast<std::size_t>(n);
  }
  return "";
}

} // namespace

std::string write_to_fd(int fd, const std::string &text) { return write_all(fd, text); }

namespace {

std::string write_directly(const std::string &path, const std::string &text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return why("cannot open");
  std::string err = write_all(fd, text);
  if (::close(fd) != 0 && err.empty()) err = why("cannot write");
  return err;
}

} // namespace

std::string write_file_atomically(const std::string &given, const std::string &text) {
  // Through a symlink the file it names is replaced, not the link.
  std::string path = given;
  std::error_code ec;
  if (std::filesystem::is_symlink(given, ec)) {
    auto target = std::filesystem::weakly_canonical(given, ec);
    if (!ec) path = target.string();
  }
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) return "is a directory";
    return write_directly(path, text);
  }
  std::string dir = ".", base = path;
  if (auto slash = path.rfind('/'); slash != std::string::npos) {
    dir = slash == 0 ? "/" : path.substr(0, slash);
    base = path.substr(slash + 1);
  }
  std::string tmpl = (dir == "/" ? "" : dir) + "/." + base + ".tmp.XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  int fd = ::mkstemp(name.data());
  if (fd < 0) return why("cannot create a temporary file in " + dir, errno);
  std::string err = write_all(fd, text);
  if (err.empty() && ::fsync(fd) != 0) err = why("cannot write");
  // mkstemp makes the file 0600; a new output file gets the usual mode, one
  // that replaces a file keeps that file's (`fmt -i` of a 0600 file).
  mode_t mask = ::umask(0);
  ::umask(mask);
  if (err.empty()) ::fchmod(fd, exists ? st.st_mode & 07777 : 0666 & ~mask);
  if (::close(fd) != 0 && err.empty()) err = why("cannot write");
  if (err.empty() && ::rename(name.data(), path.c_str()) != 0)
    err = why("cannot rename the temporary file into place");
  if (!err.empty()) ::unlink(name.data());
  return err;
}

} // namespace pipecheck::reports
