// golden/add_rows_h200.cu compiled as host C++ (host_emulation.hpp).
#include "tests/executor_cuda/host_emulation.hpp"
#define PK_HOST_EMULATION
#include "tests/executor_cuda/golden/add_rows_h200.cu"

void emulate_add_rows_h200(const float *x, const float *y, float *z, unsigned ctas, unsigned threads) {
  pk_emulate(pk_add_rows_h200, ctas, threads, x, y, z);
}
