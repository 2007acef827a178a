#include "tests/executor_cuda/host_module.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <fstream>
#include <sstream>

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

HostModule::HostModule(const std::vector<const CudaKernel *> &kernels, const std::string &dir) {
  std::ostringstream tu;
  tu << "#include \"tests/executor_cuda/host_emulation.hpp\"\n#define PK_HOST_EMULATION\n";
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    tu << in_namespace(kernels[i]->source, "pk_k" + std::to_string(i));
    ctas_.push_back(kernels[i]->ctas);
  }
  tu << "extern \"C\" bool pk_host_run(int i, void *const *a, unsigned ctas, unsigned threads, int on_wait) "
        "{\n"
     << "  pk_emulation_schedule = on_wait ? PkSchedule::on_wait : PkSchedule::eager;\n"
     << "  switch (i) {\n";
  for (std::size_t i = 0; i < kernels.size(); ++i)
    tu << "  case " << i << ": return pk_call(pk_k" << i << "::" << kernels[i]->entry
       << ", a, ctas, threads);\n";
  tu << "  }\n  return true;\n}\n";
  // A library name never used before in this process: its inline variables
  // (GNU unique symbols) keep a closed library loaded, and dlopen of a path
  // already loaded returns the old library.
  static std::atomic<int> serial{0};
  const std::string n = std::to_string(serial++);
  const std::string src = dir + "/kernels" + n + ".cpp", lib = dir + "/kernels" + n + ".so",
                    log = dir + "/compile" + n + ".log";
  std::ofstream(src) << tu.str();
  const std::string cmd = shell_quote(PIPECHECK_CXX) + " -std=c++20 -O1 -w -shared -fPIC -pthread -I" +
                          shell_quote(PIPECHECK_SOURCE_DIR) + " -o " + shell_quote(lib) + " " +
                          shell_quote(src) + " >" + shell_quote(log) + " 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    error_ = "compiling " + src + " failed: " + ss.str().substr(0, 4000);
    return;
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
  return run_(static_cast<int>(i), args.data(), static_cast<unsigned>(ctas_.at(i)), threads, on_wait ? 1 : 0);
}

} // namespace pipecheck::executor::cuda::testing
