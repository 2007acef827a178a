#include "spec/place.hpp"

#include "spec/checked.hpp"
#include "spec/eval.hpp"

#include <limits>

namespace pipecheck::spec {

namespace {
bool known(std::int64_t d) { return d != kUnknownExtent; }
} // namespace

CopyFit fit_copy(const Dims &src, const Dims &dst, const Dims &at) {
  CopyFit f{src, dst, Dims(src.size(), 0), Dims(dst.size(), 0), true};
  bool moved = false;
  for (auto o : at)
    moved = moved || o != 0;
  if (!at.empty() && (at.size() != src.size() || at.size() != dst.size())) f.fits = false;
  if (src.size() != dst.size() || src == dst) {
    f.fits = f.fits && !moved;
    return f;
  }
  bool src_fits = true, dst_fits = true;
  for (std::size_t d = 0; d < src.size(); ++d) {
    src_fits = src_fits && src[d] <= dst[d];
    dst_fits = dst_fits && dst[d] <= src[d];
  }
  // The smaller side lands at `at` in the larger (its leading corner without).
  auto place = [&](const Dims &small, const Dims &large, Dims &narrowed, Dims &start) {
    narrowed = small;
    if (!moved || !f.fits) return;
    for (std::size_t d = 0; d < small.size(); ++d) {
      if (at[d] < 0 || at[d] > large[d] - small[d]) f.fits = false;
      start[d] = at[d];
    }
  };
  if (src_fits)
    place(src, dst, f.dst, f.dst_at);
  else if (dst_fits)
    place(dst, src, f.src, f.src_at);
  else
    f.fits = f.fits && !moved;
  return f;
}

namespace {
// subscript_dims into out[0, n): false when the subscripts other than `...`
// outnumber the dims.
template <class IsEllipsis> bool map_dims(std::size_t rank, std::size_t n, IsEllipsis is_ellipsis, int *out) {
  std::size_t n_real = 0;
  for (std::size_t k = 0; k < n; ++k)
    n_real += !is_ellipsis(k);
  if (n_real > rank) return false;
  std::size_t d = 0;
  for (std::size_t k = 0; k < n; ++k) {
    if (is_ellipsis(k)) {
      std::size_t remaining = 0;
      for (std::size_t t = k + 1; t < n; ++t)
        remaining += !is_ellipsis(t);
      if (rank - remaining > d) d = rank - remaining;
      out[k] = -1;
      continue;
    }
    out[k] = static_cast<int>(d++);
  }
  return true;
}
} // namespace

std::optional<std::vector<int>> subscript_dims(std::size_t rank, const std::vector<bool> &is_ellipsis) {
  std::vector<int> out(is_ellipsis.size());
  if (!map_dims(
          rank, is_ellipsis.size(), [&](std::size_t k) { return is_ellipsis[k]; }, out.data()))
    return std::nullopt;
  return out;
}

Subscripted subscript(const Dims &array, const std::vector<Subscript> &subs) {
  Subscripted r;
  auto is_ellipsis = [&](std::size_t k) { return subs[k].kind == Subscript::Kind::ellipsis; };
  int small[8];
  std::vector<int> large;
  int *dims = small;
  if (subs.size() > 8) {
    large.resize(subs.size());
    dims = large.data();
  }
  if (!map_dims(array.size(), subs.size(), is_ellipsis, dims)) {
    std::size_t n_real = 0;
    for (std::size_t k = 0; k < subs.size(); ++k)
      n_real += !is_ellipsis(k);
    r.error = std::to_string(n_real) + " subscripts for an array of rank " + std::to_string(array.size());
    return r;
  }
  r.dims.resize(array.size());
  std::vector<std::optional<std::int64_t>> sizes; // ds() sizes per dim, once there is one
  for (std::size_t d = 0; d < array.size(); ++d)
    r.dims[d] = {0, array[d], true};
  auto oob = [&](const std::string &what, int d) {
    r.error = what + " is out of bounds for dim " + std::to_string(d) + " (extent " +
              (known(array[static_cast<std::size_t>(d)]) ? std::to_string(array[static_cast<std::size_t>(d)])
                                                         : std::string("?")) +
              ")";
    r.out_of_bounds = true;
    r.error_dim = d;
  };
  for (std::size_t k = 0; k < subs.size(); ++k) {
    const Subscript &s = subs[k];
    const int d = dims[k];
    if (d < 0) continue;
    const std::int64_t dim = array[static_cast<std::size_t>(d)];
    auto str = [](std::optional<std::int64_t> v) { return v ? std::to_string(*v) : std::string("?"); };
    if (s.kind == Subscript::Kind::slice) {
      const std::optional<std::int64_t> lo = s.has_lo ? s.lo : 0;
      const std::optional<std::int64_t> hi =
          s.has_hi ? s.hi : (known(dim) ? std::optional<std::int64_t>(dim) : std::nullopt);
      if ((lo && *lo < 0) || (hi && *hi < 0) || (lo && hi && *lo > *hi) || (hi && known(dim) && *hi > dim) ||
          (lo && known(dim) && *lo > dim)) {
        oob("slice " + str(lo) + ":" + str(hi), d);
        return r;
      }
      if (s.size && (*s.size < 0 || (known(dim) && *s.size > dim))) {
        oob("ds(" + str(lo) + ", " + std::to_string(*s.size) + ")", d);
        return r;
      }
      r.dims[static_cast<std::size_t>(d)] = {lo.value_or(kUnknownExtent), hi.value_or(kUnknownExtent), true};
      if (s.size) {
        sizes.resize(array.size());
        sizes[static_cast<std::size_t>(d)] = *s.size;
      }
    } else {
      const auto i = s.lo;
      if (i && (*i < 0 || (known(dim) && *i >= dim))) {
        oob("index " + std::to_string(*i), d);
        return r;
      }
      r.dims[static_cast<std::size_t>(d)] = {i.value_or(kUnknownExtent), i ? *i + 1 : kUnknownExtent, false};
    }
  }
  r.shape.reserve(r.dims.size());
  for (std::size_t d = 0; d < r.dims.size(); ++d) {
    const auto &x = r.dims[d];
    if (x.kept)
      r.shape.push_back(known(x.lo) && known(x.hi) ? x.hi - x.lo
                        : sizes.empty()            ? kUnknownExtent
                                                   : sizes[d].value_or(kUnknownExtent));
  }
  return r;
}

std::vector<Subscript> subscripts_of(const Expr &ref, const SubscriptValue &value) {
  std::vector<Subscript> subs;
  if (ref.op != Op::Ref) return subs;
  subs.reserve(ref.args.size());
  for (const auto &a : ref.args) {
    Subscript sub;
    if (a.op == Op::Ellipsis) {
      sub.kind = Subscript::Kind::ellipsis;
    } else if (a.op == Op::Slice) {
      sub.kind = Subscript::Kind::slice;
      sub.has_lo = !a.args.empty() && a.args[0].op != Op::None;
      sub.has_hi = a.args.size() >= 2 && a.args[1].op != Op::None;
      if (sub.has_lo) sub.lo = value(a.args[0], true);
      if (sub.has_hi) sub.hi = value(a.args[1], true);
    } else if (a.op == Op::Call && a.name == "ds" && a.args.size() == 2 && a.kwarg_names.empty()) {
      // pl.ds(start, size): the slice start:start + size.
      sub.kind = Subscript::Kind::slice;
      sub.lo = value(a.args[0], true);
      const auto size = value(a.args[1], true);
      sub.size = size;
      std::int64_t hi = 0;
      if (sub.lo && size)
        sub.hi = __builtin_add_overflow(*sub.lo, *size, &hi) ? std::numeric_limits<std::int64_t>::max() : hi;
    } else {
      sub.lo = value(a, false);
    }
    subs.push_back(sub);
  }
  return subs;
}

std::optional<std::int64_t> static_slice_size(const Expr &lo, const Expr &hi) {
  const auto l = eval_int(lo, {}), h = eval_int(hi, {});
  if (l && h) return checked_sub(*h, *l);
  if (hi.op == Op::Add && hi.args[0] == lo) return eval_int(hi.args[1], {});
  if (hi.op == Op::Add && hi.args[1] == lo) return eval_int(hi.args[0], {});
  return std::nullopt;
}

} // namespace pipecheck::spec
