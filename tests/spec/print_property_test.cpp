// parse(print(x)) == x over generated kernel specs and pipelines, and print is a fixed point.
#include "properties/spec_gen.hpp"
#include "spec/parse.hpp"
#include "spec/print.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

using namespace pipecheck;

RC_GTEST_PROP(PrintProperty, ParsingAPrintedKernelSpecGivesItBack, ()) {
  spec::KernelSpec k = *properties::kernel_spec();
  spec::File f;
  f.units.emplace_back(k);
  std::string text = spec::print(f);
  auto r = spec::parse(spec::SourceFile::from_string("gen.pk", text));
  RC_ASSERT(r.errors.empty());
  RC_ASSERT(r.file.has_value());
  RC_ASSERT(*r.file == f);
  RC_ASSERT(spec::print(*r.file) == text);
}

RC_GTEST_PROP(PrintProperty, ParsingAPrintedPipelineGivesItBack, ()) {
  spec::Program p = *properties::program();
  spec::File f;
  f.units.emplace_back(p);
  std::string text = spec::print(f);
  auto r = spec::parse(spec::SourceFile::from_string("gen.pk", text));
  if (!r.errors.empty()) RC_LOG() << text << "\n" << r.errors[0].loc.line << ": " << r.errors[0].message;
  RC_ASSERT(r.errors.empty());
  RC_ASSERT(*r.file == f);
  RC_ASSERT(spec::print(*r.file) == text);
}
