#include "executor/npy.hpp"

#include <bit>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

namespace pipecheck::executor {

static_assert(std::endian::native == std::endian::little, "HostArray data is written as little-endian .npy");

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;

// The header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// — Python literal syntax, keys in any order.
class HeaderParser {
public:
  explicit HeaderParser(std::string_view s) : s_(s) {}

  std::string descr;
  std::optional<bool> fortran;
  std::optional<Shape> shape;

  void parse() {
    expect('{');
    for (;;) {
      skip();
      if (peek() == '}') break;
      const std::string key = string();
      expect(':');
      skip();
      if (key == "descr") {
        if (peek() != '\'' && peek() != '"')
          throw NpyError("descr " + rest() + " is a structured dtype; only plain numeric dtypes are read");
        descr = string();
      } else if (key == "fortran_order") {
        fortran = boolean();
      } else if (key == "shape") {
        shape = tuple();
      } else {
        throw NpyError("unknown header key '" + key + "'");
      }
      skip();
      if (peek() == ',') {
        ++p_;
        continue;
      }
      skip();
      if (peek() != '}') throw NpyError("expected ',' or '}' in the header at " + rest());
    }
    if (descr.empty() || !fortran || !shape) throw NpyError("the header lacks descr, fortran_order or shape");
  }

private:
  std::string_view s_;
  std::size_t p_ = 0;

  char peek() const { return p_ < s_.size() ? s_[p_] : '\0'; }
  void skip() {
    while (p_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[p_])))
      ++p_;
  }
  std::string rest() const { return "'" + std::string(s_.substr(p_, 20)) + "'"; }
  void expect(char c) {
    skip();
    if (peek() != c) throw NpyError(std::string("expected '") + c + "' in the header at " + rest());
    ++p_;
  }
  std::string string() {
    skip();
    const char q = peek();
    if (q != '\'' && q != '"') throw NpyError("expected a string in the header at " + rest());
    const std::size_t end = s_.find(q, p_ + 1);
    if (end == std::string_view::npos) throw NpyError("an unterminated string in the header");
    std::string r(s_.substr(p_ + 1, end - p_ - 1));
    p_ = end + 1;
    return r;
  }
  bool boolean() {
    if (s_.substr(p_, 4) == "True") {
      p_ += 4;
      return true;
    }
    if (s_.substr(p_, 5) == "False") {
      p_ += 5;
      return false;
    }
    throw NpyError("expected True or False in the header at " + rest());
  }
  Shape tuple() {
    expect('(');
    Shape r;
    for (;;) {
      skip();
      if (peek() == ')') {
        ++p_;
        return r;
      }
      if (!std::isdigit(static_cast<unsigned char>(peek())))
        throw NpyError("expected a dimension in the shape at " + rest());
      std::int64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        const int d = peek() - '0';
        if (v > (std::numeric_limits<std::int64_t>::max() - d) / 10) throw NpyError("a dimension over int64");
        v = v * 10 + d;
        ++p_;
      }
      r.push_back(v);
      skip();
      if (peek() == ',')
        ++p_;
      else if (peek() != ')')
        throw NpyError("expected ',' or ')' in the shape at " + rest());
    }
  }
};

std::uint32_t little(const unsigned char *p, int n) {
  std::uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

} // namespace

const char *npy_descr(spec::DType t) {
  switch (t) {
  case spec::DType::f32: return "<f4";
  case spec::DType::f16: return "<f2";
  case spec::DType::bf16: return "|V2";
  case spec::DType::i32: return "<i4";
  case spec::DType::i16: return "<i2";
  case spec::DType::i8: return "|i1";
  case spec::DType::u8: return "|u1";
  case spec::DType::boolean: return "|b1";
  }
  return "?";
}

std::optional<spec::DType> dtype_of_npy_descr(const std::string &d) {
  using spec::DType;
  for (DType t :
       {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i16, DType::i8, DType::u8, DType::boolean})
    if (d == npy_descr(t)) return t;
  // Byte order is '<', '|' or '=' for one-byte types and the void bf16.
  if (d == "<V2" || d == "=V2" || d == "bfloat16") return DType::bf16;
  if (d == "<i1" || d == "=i1") return DType::i8;
  if (d == "<u1" || d == "=u1") return DType::u8;
  if (d == "<b1" || d == "=b1" || d == "|?") return DType::boolean;
  if (d.size() == 3 && d[0] == '=') return dtype_of_npy_descr("<" + d.substr(1));
  return std::nullopt;
}

std::string npy_bytes(const HostArray &a) {
  std::ostringstream h;
  h << "{'descr': '" << npy_descr(a.dtype()) << "', 'fortran_order': False, 'shape': (";
  for (std::size_t d = 0; d < a.shape().size(); ++d)
    h << a.shape()[d] << (a.shape().size() == 1 || d + 1 < a.shape().size() ? "," : "")
      << (d + 1 < a.shape().size() ? " " : "");
  h << "), }";
  std::string header = h.str();
  // Magic, version and length take 10 bytes; the header ends in '\n' and
  // pads the data's start to a multiple of 64, as NumPy does.
  const std::size_t total = (10 + header.size() + 1 + 63) / 64 * 64;
  header.append(total - 10 - header.size() - 1, ' ');
  header += '\n';
  std::string out(kMagic, kMagicLen);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  out.append(reinterpret_cast<const char *>(a.data()), static_cast<std::size_t>(a.bytes()));
  return out;
}

std::unique_ptr<HostArray> parse_npy(std::string_view bytes, const std::string &name) {
  if (bytes.size() < 10 || bytes.substr(0, kMagicLen) != std::string_view(kMagic, kMagicLen))
    throw NpyError("not a NumPy .npy file (no \\x93NUMPY magic)");
  const auto *u = reinterpret_cast<const unsigned char *>(bytes.data());
  const int major = u[6];
  std::size_t start = 0, len = 0;
  if (major == 1) {
    len = little(u + 8, 2);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw NpyError("a truncated header");
    len = little(u + 8, 4);
    start = 12;
  } else {
    throw NpyError("format version " + std::to_string(major) + "." + std::to_string(u[7]) +
                   " (this reads 1.0, 2.0 and 3.0)");
  }
  if (bytes.size() - start < len) throw NpyError("a truncated header");
  HeaderParser hp(bytes.substr(start, len));
  hp.parse();
  if (*hp.fortran)
    throw NpyError("the array is in Fortran order; save a C-order array (np.ascontiguousarray)");
  const auto dtype = dtype_of_npy_descr(hp.descr);
  if (!dtype)
    throw NpyError("dtype '" + hp.descr + "' is not one pipecheck reads" +
                   (hp.descr.size() > 1 && hp.descr[0] == '>' ? " (big-endian: save it little-endian)" : "") +
                   " (f32 <f4, f16 <f2, bf16 |V2, i32 <i4, i16 <i2, i8 |i1, u8 |u1, bool |b1)");
  Shape shape = *hp.shape;
  // What the shape needs, against what the file holds, before allocating (a
  // header may claim 2^40 rows of a few bytes' data).
  const std::size_t data = start + len;
  std::uint64_t claimed = spec::dtype_bytes(*dtype);
  bool too_large = false;
  for (auto d : shape)
    too_large =
        too_large || d < 0 || __builtin_mul_overflow(claimed, static_cast<std::uint64_t>(d), &claimed);
  if (too_large || claimed != bytes.size() - data)
    throw NpyError("the data holds " + std::to_string(bytes.size() - data) + " bytes, but shape " +
                   shape_string(shape) + " of " + hp.descr + " needs " +
                   (too_large ? std::string("more than 2^64") : std::to_string(claimed)));
  // (No larger than the file, so it can be allocated.)
  auto a = std::make_unique<HostArray>(name, *dtype, shape);
  if (claimed) std::memcpy(a->data(), bytes.data() + data, claimed);
  return a;
}

std::unique_ptr<HostArray> read_npy(const std::string &path, const std::string &name,
                                    std::uint64_t max_bytes) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > max_bytes)
    throw NpyError(path + ": " + std::to_string(size) + " bytes, more than the array it should hold");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw NpyError(path + ": cannot be read: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  try {
    return parse_npy(ss.str(), name);
  } catch (const NpyError &e) {
    throw NpyError(path + ": " + e.what());
  }
}

spec::LoadedContents load_prefetch_npy(const std::string &path) {
  spec::LoadedContents c;
  try {
    // SMEM holds at most 65536 prefetched i32: a file far over that is refused unread.
    auto a = read_npy(path, "prefetch", std::uint64_t{1} << 26);
    if (spec::dtype_is_float(a->dtype()) || a->dtype() == spec::DType::boolean || a->shape().empty() ||
        a->shape().size() > 4) {
      c.error = path + ": the file must hold an integer array of rank 1 to 4, not " +
                std::string(spec::to_string(a->dtype())) + " of rank " + std::to_string(a->shape().size());
      return c;
    }
    c.shape.assign(a->shape().begin(), a->shape().end());
    std::vector<std::int64_t> v;
    v.reserve(static_cast<std::size_t>(a->size()));
    for (std::int64_t i = 0; i < a->size(); ++i)
      v.push_back(static_cast<std::int64_t>(a->get(i)));
    c.values = std::move(v);
  } catch (const NpyError &e) {
    c.error = e.what();
  }
  return c;
}

void write_npy(const std::string &path, const HostArray &a) {
  const std::string bytes = npy_bytes(a);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (out) out.close();
  if (!out) throw NpyError(path + ": cannot be written");
}

} // namespace pipecheck::executor
