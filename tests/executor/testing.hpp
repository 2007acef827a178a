#pragma once
// Helpers for the executor tests: parse .pk text or corpus files, find units.

#include "executor/value.hpp"
#include "spec/diag.hpp"
#include "spec/parse.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace pipecheck::executor::testing {

inline spec::File parse_text(const std::string &text, const std::string &path = "t.pk") {
  const auto sf = spec::SourceFile::from_string(path, text);
  auto r = spec::parse(sf);
  if (!r.file) throw std::runtime_error("parse failed: " + spec::render(sf, r.errors.at(0)));
  return *r.file;
}

inline spec::File load_corpus(const std::string &rel) {
  std::ifstream in(std::string(PIPECHECK_SOURCE_DIR) + "/" + rel);
  if (!in) throw std::runtime_error("cannot read " + rel);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_text(ss.str(), rel);
}

/// A float value of `shape` holding `v` (dtype `t`), untracked.
inline Value floats(Shape shape, std::vector<float> v, spec::DType t = spec::DType::f32) {
  Value r;
  r.dtype = t;
  r.shape = std::move(shape);
  r.f.assign(v.begin(), v.end());
  return r;
}

template <class T> const T &unit(const spec::File &f, const std::string &name) {
  for (const auto &u : f.units)
    if (const T *t = std::get_if<T>(&u); t && t->name == name) return *t;
  throw std::runtime_error("no unit " + name);
}

/// In-place SGD over an aliased HBM buffer, `p - 0.5 * g`, each chunk
/// copied back through the input's ref (on a TPU the input and its output
/// are one buffer).
inline const char *sgd_through_aliased_input() {
  return R"(kernel k:
    grid = (2,)
    in  g: f32[16, 128]  block=(8, 128)  index=(i,) -> (i, 0)
    in  p: f32[16, 128]  memory_space=any
    out o: f32[16, 128]  memory_space=any
    scratch buf: f32[8, 128]
    alias p -> o
    body:
        sync_copy(p[ds(program_id(0) * 8, 8), :], buf[...])
        buf[...] = buf[...] - 0.5 * g[...]
        sync_copy(buf[...], p[ds(program_id(0) * 8, 8), :])
)";
}

} // namespace pipecheck::executor::testing
