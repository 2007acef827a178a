// NumPy .npy files: what we write is NumPy's format byte for byte, reads back
// equal for every dtype, and a file we cannot use says why.
#include "executor/npy.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include <unistd.h>

using namespace pipecheck;
using namespace pipecheck::executor;

namespace {

std::unique_ptr<HostArray> sample(spec::DType t, Shape shape) {
  auto a = std::make_unique<HostArray>("x", t, shape);
  a->fill_random(7);
  return a;
}

bool same_bytes(const HostArray &a, const HostArray &b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.bytes())) == 0;
}

// The header NumPy writes for np.save(f, np.zeros((2, 3), np.float32)): the
// dict, spaces up to a 64-byte boundary, '\n'.
std::string numpy_header_2x3_f32() {
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  std::string h = std::string("\x93NUMPY\x01\x00", 8) + '\x76' + '\x00' + dict + std::string(58, ' ') + "\n";
  return h;
}

} // namespace

TEST(Npy, WritesNumPysHeaderByteForByte) {
  HostArray a("x", spec::DType::f32, {2, 3});
  a.fill_zero();
  const std::string bytes = npy_bytes(a);
  ASSERT_EQ(bytes.size(), 128u + 24u);
  EXPECT_EQ(bytes.substr(0, 128), numpy_header_2x3_f32());
}

TEST(Npy, WritesRankOneAndScalarShapesAsPythonTuples) {
  HostArray v("v", spec::DType::i32, {5});
  v.fill_zero();
  EXPECT_NE(npy_bytes(v).find("'shape': (5,), }"), std::string::npos);
  HostArray s("s", spec::DType::i32, {});
  s.fill_zero();
  EXPECT_NE(npy_bytes(s).find("'shape': (), }"), std::string::npos);
  EXPECT_EQ(npy_bytes(s).size() % 64, 4u); // header padded to 64, then one i32
}

TEST(Npy, EveryDtypeRoundTrips) {
  using spec::DType;
  for (DType t :
       {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i16, DType::i8, DType::u8, DType::boolean})
    for (const Shape &shape : {Shape{}, Shape{7}, Shape{3, 5}, Shape{2, 3, 4}, Shape{0, 4}}) {
      auto a = sample(t, shape);
      auto b = parse_npy(npy_bytes(*a), "x");
      EXPECT_TRUE(same_bytes(*a, *b)) << spec::to_string(t) << shape_string(shape);
      EXPECT_EQ(b->name(), "x");
    }
}

TEST(Npy, ReadsNumPysHeaderWithKeysInAnyOrderAndVersionTwo) {
  const std::string dict = "{'shape': (2,), 'fortran_order': False, 'descr': '<i4'}";
  std::string v2 = std::string("\x93NUMPY\x02\x00", 8);
  const std::string header = dict + "\n";
  v2 += static_cast<char>(header.size());
  v2 += std::string(3, '\0');
  v2 += header;
  const std::int32_t data[2] = {-3, 42};
  v2.append(reinterpret_cast<const char *>(data), sizeof data);
  auto a = parse_npy(v2, "n");
  EXPECT_EQ(a->dtype(), spec::DType::i32);
  EXPECT_EQ(a->shape(), (Shape{2}));
  EXPECT_EQ(a->get(0), -3);
  EXPECT_EQ(a->get(1), 42);
}

TEST(Npy, ReadsBf16FromTheVoidDescr) {
  EXPECT_EQ(dtype_of_npy_descr("|V2"), spec::DType::bf16);
  EXPECT_EQ(dtype_of_npy_descr("<V2"), spec::DType::bf16);
  EXPECT_EQ(dtype_of_npy_descr("<f4"), spec::DType::f32);
  EXPECT_EQ(dtype_of_npy_descr("|b1"), spec::DType::boolean);
  EXPECT_FALSE(dtype_of_npy_descr("<f8"));
  EXPECT_FALSE(dtype_of_npy_descr(">f4"));
}

TEST(Npy, SaysWhyAFileCannotBeRead) {
  auto error_of = [](const std::string &bytes) {
    try {
      parse_npy(bytes, "x");
    } catch (const NpyError &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("hello").find("not a NumPy .npy file"), std::string::npos);
  std::string f = numpy_header_2x3_f32();
  EXPECT_NE(
      error_of(f + std::string(20, '\0')).find("the data holds 20 bytes, but shape [2, 3] of <f4 needs 24"),
      std::string::npos)
      << error_of(f + std::string(20, '\0'));
  std::string fortran = f;
  fortran.replace(fortran.find("False"), 5, "True ");
  EXPECT_NE(error_of(fortran + std::string(24, '\0')).find("Fortran order"), std::string::npos);
  std::string big = f;
  big.replace(big.find("<f4"), 3, ">f4");
  EXPECT_NE(error_of(big + std::string(24, '\0')).find("big-endian"), std::string::npos);
  std::string f8 = f;
  f8.replace(f8.find("<f4"), 3, "<f8");
  EXPECT_NE(error_of(f8 + std::string(48, '\0')).find("dtype '<f8' is not one pipecheck reads"),
            std::string::npos);
  EXPECT_NE(error_of(f.substr(0, 40)).find("truncated header"), std::string::npos);
  // A header that claims far more than the file holds is refused before
  // anything is allocated (a bad_alloc was an internal error).
  // (The header with another shape, its padding shortened to keep its length.)
  auto claiming = [&](const std::string &shape) {
    std::string h = f;
    h.replace(h.find("(2, 3)"), 6, shape);
    h.erase(h.find(", }") + 3, shape.size() - 6);
    return error_of(h + std::string(24, '\0'));
  };
  const std::string huge = claiming("(1099511627776, 128)");
  EXPECT_NE(huge.find("the data holds 24 bytes, but shape [1099511627776, 128]"), std::string::npos) << huge;
  const std::string overflow = claiming("(4294967296, 4294967296)");
  EXPECT_NE(overflow.find("needs more than 2^64"), std::string::npos) << overflow;
}

TEST(Npy, WritesAndReadsFiles) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("pipecheck_npy_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto a = sample(spec::DType::bf16, {4, 8});
  const std::string path = (dir / "x.npy").string();
  write_npy(path, *a);
  EXPECT_TRUE(same_bytes(*a, *read_npy(path, "x")));
  EXPECT_THROW(read_npy((dir / "missing.npy").string(), "x"), NpyError);
  EXPECT_THROW(write_npy((dir / "no" / "such" / "dir.npy").string(), *a), NpyError);
  std::filesystem::remove_all(dir);
}
