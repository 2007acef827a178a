#pragma once
/// NumPy `.npy` files (format versions 1.0, 2.0 and 3.0): a magic string,
/// a version, a little header dict (`descr`, `fortran_order`, `shape`) and
/// the raw elements in C order. `run --inputs DIR` reads one per input and
/// `run --save DIR` writes them, so a JAX user can compare with their own run.
///
/// Dtypes, as `descr`: f32 `<f4`, f16 `<f2`, i32 `<i4`, i16 `<i2`, i8 `|i1`,
/// u8 `|u1`, bool `|b1`. NumPy has no bfloat16: a bf16 array is written as
/// `|V2` (the raw bf16 bits; `np.load(f).view(ml_dtypes.bfloat16)` reads it)
/// and read from `|V2` or `<V2`, or from the `descr` ml_dtypes writes for it.

#include "executor/tensor.hpp"
#include "spec/parse.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace pipecheck::executor {

/// Why a file is not an .npy we can read, or cannot be written.
class NpyError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// The descr `write_npy` writes for a dtype.
const char *npy_descr(spec::DType);
/// The dtype a descr denotes (little-endian or byte-order-free only).
std::optional<spec::DType> dtype_of_npy_descr(const std::string &descr);

/// The bytes of an .npy file holding `a` (version 1.0, header padded to 64).
std::string npy_bytes(const HostArray &a);
/// Parses .npy bytes into an array named `name`. Throws NpyError with the
/// reason (not an .npy file, a truncated header or data, Fortran order, a
/// big-endian or unknown dtype).
std::unique_ptr<HostArray> parse_npy(std::string_view bytes, const std::string &name);

/// Reads `path`; throws NpyError (naming the path) when it cannot, or when
/// the file is over `max_bytes` (a file far larger than the array it should
/// hold is refused before it is read).
std::unique_ptr<HostArray> read_npy(const std::string &path, const std::string &name,
                                    std::uint64_t max_bytes = UINT64_MAX);
/// The contents of a prefetch operand from an .npy file (`prefetch NAME:
/// i32[n] from "FILE"`, `--prefetch NAME=FILE`): an integer array of rank 1
/// to 4, flat in C order with its shape, as spec::PrefetchLoader wants them;
/// the error names the path otherwise.
spec::LoadedContents load_prefetch_npy(const std::string &path);

/// Writes `a` to `path`; throws NpyError (naming the path) when it cannot.
void write_npy(const std::string &path, const HostArray &a);

} // namespace pipecheck::executor
