// golden/double_buffered_add_one.cu compiled as host C++ (host_emulation.hpp).
#include "tests/executor_cuda/host_emulation.hpp"
#define PK_HOST_EMULATION
#include "tests/executor_cuda/golden/double_buffered_add_one.cu"

void emulate_double_buffered_add_one(float *a, unsigned threads) {
  pk_emulate(pk_double_buffered_add_one, 1, threads, a);
}
