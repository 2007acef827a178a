#include "tests/executor_cuda/host_module.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/file.h>
#include <unistd.h>

namespace pipecheck::executor::cuda::testing {

namespace {

// The source without its C linkage, so that it can live in a namespace.
std::string in_namespace(std::string source, const std::string &ns) {
  const std::string c = "extern \"C\" ";
  for (auto at = source.find(c); at != std::string::npos; at = source.find(c, at))
    source.erase(at, c.size());
  // The kernel's `extern __shared__ ... pk_smem[]` declares ns::pk_smem: its
  // own block's shared memory.
  return "namespace " + ns + " {\nalignas(16) unsigned char pk_smem[sizeof(::pk_smem)];\n" + source +
         "} // namespace " + ns + "\n";
}

std::string shell_quote(const std::string &s) {
  std::string r = "'";
  for (char ch : s)
    r += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return r + "'";
}

} // namespace

std::string host_module_dir() {
  const auto d = std::filesystem::temp_directory_path() / "pipecheck-host-modules";
  std::filesystem::create_directories(d);
  return d.string();
}

HostModule::HostModule(const std::vector<const CudaKernel *> &kernels, const std::string &dir,
                       const std::string &defines) {
  std::ostringstream tu;
  tu << defines << "\n#include \"tests/executor_cuda/host_emulation.hpp\"\n#define PK_HOST_EMULATION\n";
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    tu << in_namespace(kernels[i]->source, "pk_k" + std::to_string(i));
    ctas_.push_back(kernels[i]->ctas);
    threads_.push_back(kernels[i]->wgmma ? kernels[i]->threads : 0);
  }
  tu << "extern \"C\" bool pk_host_run(int i, void *const *a, unsigned ctas, unsigned threads, int on_wait) "
        "{\n"
     << "  pk_emulation_schedule = on_wait ? PkSchedule::on_wait : PkSchedule::eager;\n"
     << "  switch (i) {\n";
  for (std::size_t i = 0; i < kernels.size(); ++i)
    tu << "  case " << i << ": pk_smem_base = pk_k" << i << "::pk_smem; return pk_call(pk_k" << i
       << "::" << kernels[i]->entry << ", a, ctas, threads);\n";
  tu << "  }\n  return true;\n}\n";
  const std::string tu_text = tu.str();
  // The library is named by a hash of what it is built from (the unit and
  // the emulation header), so a test process that finds it built reuses it
  // (each test of a suite runs in its own process). It is built under a
  // name of its own and renamed, so that parallel tests never see half a
  // file.
  std::string header;
  {
    std::ifstream in(std::string(PIPECHECK_SOURCE_DIR) + "/tests/executor_cuda/host_emulation.hpp");
    std::stringstream ss;
    ss << in.rdbuf();
    header = ss.str();
  }
  std::uint64_t h = 1469598103934665603ull; // FNV-1a
  const std::string compiler = PIPECHECK_CXX;
  for (const std::string *t : {static_cast<const std::string *>(&header), &compiler, &tu_text})
    for (unsigned char c : *t)
      h = (h ^ c) * 1099511628211ull;
  char name[32];
  std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(h));
  const std::string lib = dir + "/kernels-" + name + ".so";
  // One process builds it while the others that want it wait on its lock
  // (ctest -j runs tests that want the same library at once: each built the
  // corpus' two-minute library itself).
  struct Lock {
    int fd;
    explicit Lock(const std::string &path) : fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
      if (fd >= 0) ::flock(fd, LOCK_EX);
    }
    ~Lock() {
      if (fd >= 0) ::close(fd); // (releases the lock)
    }
  } lock(dir + "/kernels-" + name + ".lock");
  if (!std::filesystem::exists(lib)) {
    static std::atomic<int> serial{0};
    const std::string n = std::to_string(::getpid()) + "-" + std::to_string(serial++);
    const std::string src = dir + "/kernels-" + n + ".cpp", tmp = dir + "/kernels-" + n + ".so",
                      log = dir + "/compile-" + n + ".log";
    std::ofstream(src) << tu_text;
    const std::string cmd = shell_quote(PIPECHECK_CXX) + " -std=c++20 -O1 -w -shared -fPIC -pthread -I" +
                            shell_quote(PIPECHECK_SOURCE_DIR) + " -o " + shell_quote(tmp) + " " +
                            shell_quote(src) + " >" + shell_quote(log) + " 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      std::ifstream in(log);
      std::stringstream ss;
      ss << in.rdbuf();
      error_ = "compiling " + src + " failed: " + ss.str().substr(0, 4000);
      return;
    }
    std::filesystem::rename(tmp, lib);
    std::filesystem::remove(src);
    std::filesystem::remove(log);
  }
  handle_ = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    error_ = std::string("dlopen: ") + dlerror();
    return;
  }
  run_ =
      reinterpret_cast<bool (*)(int, void *const *, unsigned, unsigned, int)>(dlsym(handle_, "pk_host_run"));
  if (!run_) error_ = "no pk_host_run in " + lib;
}

HostModule::~HostModule() {
  if (handle_) dlclose(handle_);
}

bool HostModule::run(std::size_t i, const std::vector<void *> &args, unsigned threads, bool on_wait) const {
  if (threads_.at(i) > 0) threads = static_cast<unsigned>(threads_[i]);
  return run_(static_cast<int>(i), args.data(), static_cast<unsigned>(ctas_.at(i)), threads, on_wait ? 1 : 0);
}

} // namespace pipecheck::executor::cuda::testing
