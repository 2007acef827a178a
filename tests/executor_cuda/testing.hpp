#pragma once
// Helpers for the executor/cuda tests: corpus files, units, lowering.

#include "spec/diag.hpp"
#include "spec/lower.hpp"
#include "spec/parse.hpp"

#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace pipecheck::executor::cuda::testing {

/// A Mosaic GPU elementwise kernel with a CTA axis and a sequential axis: 2
/// CTAs of 4 steps each through 2-slot rings, its output block moving each
/// step (so write-backs queue). golden/add_rows_h200.cu is its source.
inline const char *const add_rows_h200 = R"(kernel add_rows_h200:
    grid = (2, 4)
    dimension_semantics = (parallel, sequential)
    target = h200
    max_concurrent_steps = 2
    in  x: f32[64, 256]  block=(32, 64)  index=(i, j) -> (i, j)
    in  y: f32[64, 256]  block=(32, 64)  index=(i, j) -> (i, j)
    out z: f32[64, 256]  block=(32, 64)  index=(i, j) -> (i, j)
    body:
        z[...] = x[...] * 2 + y[...]
)";

/// `n` floats uniform in [-1, 1), the same for the same seed.
inline std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto &x : v)
    x = d(g);
  return v;
}

/// The bytes of `v` (a launch's host array), and back.
inline std::vector<unsigned char> bytes_of(const std::vector<float> &v) {
  std::vector<unsigned char> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}
inline std::vector<float> floats_of(const std::vector<unsigned char> &b) {
  std::vector<float> v(b.size() / sizeof(float));
  std::memcpy(v.data(), b.data(), v.size() * sizeof(float));
  return v;
}

inline std::string read_file(const std::string &path) {
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline spec::File parse_text(const std::string &text, const std::string &path) {
  const auto sf = spec::SourceFile::from_string(path, text);
  auto r = spec::parse(sf);
  if (!r.file) throw std::runtime_error("parse failed: " + spec::render(sf, r.errors.at(0)));
  return *r.file;
}

inline spec::File load_corpus(const std::string &rel) {
  const std::string text = read_file(std::string(PIPECHECK_SOURCE_DIR) + "/" + rel);
  if (text.empty()) throw std::runtime_error("cannot read " + rel);
  return parse_text(text, rel);
}

template <class T> const T &unit(const spec::File &f, const std::string &name) {
  for (const auto &u : f.units)
    if (const T *t = std::get_if<T>(&u); t && t->name == name) return *t;
  throw std::runtime_error("no unit " + name);
}

inline spec::Lowered lower(const spec::KernelSpec &k, const std::string &target, spec::Env overrides = {}) {
  spec::LowerOptions o;
  o.target = target;
  o.overrides = std::move(overrides);
  std::vector<spec::Diagnostic> errors;
  auto l = spec::lower(k, o, errors);
  if (!l) throw std::runtime_error("lowering " + k.name + " failed");
  return *l;
}

} // namespace pipecheck::executor::cuda::testing
