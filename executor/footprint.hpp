#pragma once
/// Heap footprints of what a run keeps: the bytes malloc hands out for the
/// run's syntax trees, event timeline and copy records, counted from the same
/// objects (or the same shapes) the run allocates. `run` sizes itself with
/// these before it allocates anything (executor/run.hpp), and the event
/// timeline stops growing at its byte budget with them. All saturating.

#include "executor/events.hpp"
#include "spec/checked.hpp"
#include "spec/ir.hpp"

#include <cstdint>
#include <string>
#include <variant>

namespace pipecheck::executor::footprint {

/// What malloc takes for a request of `n` bytes: a header and 16-byte
/// granules (glibc; other allocators take no more for these sizes).
inline std::uint64_t chunk(std::uint64_t n) {
  if (n == 0) return 0;
  return spec::saturating_add(n, std::uint64_t{8 + 15}) & ~std::uint64_t{15};
}

/// The heap bytes of a string (none while it fits the small-string buffer).
inline std::uint64_t heap(const std::string &s) { return s.capacity() > 15 ? chunk(s.capacity() + 1) : 0; }

inline std::uint64_t heap(const spec::Expr &e) {
  std::uint64_t n = chunk(e.args.capacity() * sizeof(spec::Expr)) + heap(e.name) +
                    chunk(e.kwarg_names.capacity() * sizeof(std::string));
  for (const auto &k : e.kwarg_names)
    n = spec::saturating_add(n, heap(k));
  for (const auto &a : e.args)
    n = spec::saturating_add(n, heap(a));
  return n;
}

std::uint64_t heap(const spec::Block &);

inline std::uint64_t heap(const spec::Stmt &s) {
  std::uint64_t n = chunk(s.comments.leading.capacity() * sizeof(std::string)) + heap(s.comments.trailing);
  for (const auto &c : s.comments.leading)
    n += heap(c);
  std::visit(
      [&](const auto &k) {
        using K = std::decay_t<decltype(k)>;
        if constexpr (std::is_same_v<K, spec::Assign>)
          n += heap(k.target) + heap(k.value);
        else if constexpr (std::is_same_v<K, spec::Let>)
          n += heap(k.name) + heap(k.value);
        else if constexpr (std::is_same_v<K, spec::If>)
          n += heap(k.cond) + heap(k.then_body) + heap(k.else_body);
        else if constexpr (std::is_same_v<K, spec::For>)
          n += heap(k.var) + heap(k.lo) + heap(k.hi) + heap(k.body);
        else if constexpr (std::is_same_v<K, spec::Copy>)
          n += heap(k.src) + heap(k.dst) + heap(k.offset);
        else if constexpr (std::is_same_v<K, spec::Wgmma>)
          n += heap(k.acc) + heap(k.a) + heap(k.b);
        else if constexpr (std::is_same_v<K, spec::WgmmaWait>)
          n += heap(k.n);
        else if constexpr (std::is_same_v<K, spec::Dma>)
          n += heap(k.descriptor) + heap(k.src) + heap(k.dst) + heap(k.sem) + heap(k.n);
        else if constexpr (std::is_same_v<K, spec::EmitPipeline>) {
          for (const auto &g : k.grid)
            n += heap(g);
          n += heap(k.body);
        }
      },
      s.kind);
  return n;
}

inline std::uint64_t heap(const spec::Block &b) {
  std::uint64_t n = chunk(b.capacity() * sizeof(spec::Stmt));
  for (const auto &s : b)
    n = spec::saturating_add(n, heap(s));
  return n;
}

/// The heap bytes an event's strings take (the event itself lives in the
/// timeline's vector).
inline std::uint64_t heap(const Event &e) { return heap(e.buffer) + heap(e.detail); }

/// The heap bytes of a dense array of `shape` (saturating: huge is huge).
template <class Shape> std::uint64_t array_bytes(const Shape &shape, spec::DType t) {
  std::uint64_t n = static_cast<std::uint64_t>(spec::dtype_bytes(t));
  for (auto d : shape)
    n = spec::saturating_mul(n, static_cast<std::uint64_t>(d < 0 ? 0 : d));
  return n;
}

} // namespace pipecheck::executor::footprint
