#include "executor/interp.hpp"

#include "testing.hpp"

#include <gtest/gtest.h>

using namespace pipecheck;
using namespace pipecheck::executor;

namespace {

class Arrays : public Memory {
public:
  std::map<std::string, HostArray *> m;
  HostArray *array(const std::string &n) override {
    auto it = m.find(n);
    return it == m.end() ? nullptr : it->second;
  }
};

/// The body of `kernel k:` with the given statements.
spec::Block body(const std::string &stmts) {
  const auto f = executor::testing::parse_text("kernel k:\n    in x: f32[4, 8]\n    out o: f32[4, 8]\n"
                                               "    body:\n" +
                                               stmts);
  return std::get<spec::KernelSpec>(f.units.at(0)).body;
}

} // namespace

TEST(Interp, SubscriptsLikeNumpyIndexDropsSliceKeeps) {
  HostArray x("x", spec::DType::f32, {2, 4, 8});
  Arrays mem;
  mem.m["x"] = &x;
  Interp in(mem);
  in.env["i"] = 1;
  const auto b = body("        o[...] = x[i, 1:3]\n        o[...] = x[..., 2]\n"
                      "        o[...] = x[0, :, 4:]\n");
  auto target_of = [&](int k) { return std::get<spec::Assign>(b[k].kind).value; };
  const View v0 = in.view_of(target_of(0));
  EXPECT_EQ(v0.shape(), (Shape{2, 8}));
  EXPECT_EQ(v0.to_string(), "x[1, 1:3, :]");
  EXPECT_EQ(in.view_of(target_of(1)).shape(), (Shape{2, 4}));
  EXPECT_EQ(in.view_of(target_of(2)).shape(), (Shape{4, 4}));
}

TEST(Interp, AnOutOfBoundsIndexIsAFaultNotACrash) {
  HostArray x("x", spec::DType::f32, {2, 8});
  Arrays mem;
  mem.m["x"] = &x;
  Interp in(mem);
  in.env["i"] = 2;
  const auto b = body("        o[...] = x[i]\n");
  try {
    in.view_of(std::get<spec::Assign>(b[0].kind).value);
    FAIL();
  } catch (const ExecError &e) {
    EXPECT_EQ(e.kind, ExecError::Kind::fault);
    EXPECT_NE(std::string(e.what()).find("out of bounds"), std::string::npos);
  }
}

TEST(Interp, WhenGuardsOnProgramIdAndAccumulates) {
  HostArray x("x", spec::DType::f32, {4, 8}), o("o", spec::DType::f32, {4, 8});
  x.fill_random(2);
  o.fill_poison();
  Arrays mem;
  mem.m = {{"x", &x}, {"o", &o}};
  Interp in(mem);
  const auto b = rewrite_grid_calls(body("        when program_id(0) == 0:\n"
                                         "            o[...] = zeros\n"
                                         "        o[...] += x[...] * 2\n"));
  for (int step = 0; step < 3; ++step) {
    in.env[program_id_name(0)] = step;
    in.exec(b);
  }
  for (int e = 0; e < 32; e += 5)
    EXPECT_FLOAT_EQ(static_cast<float>(o.get(e)), static_cast<float>(x.get(e)) * 6);
}

TEST(Interp, UnknownNamesAndFunctionsAreBadInput) {
  HostArray x("x", spec::DType::f32, {4, 8}), o("o", spec::DType::f32, {4, 8});
  Arrays mem;
  mem.m = {{"x", &x}, {"o", &o}};
  Interp in(mem);
  EXPECT_THROW(in.exec(body("        o[...] = nope\n")), ExecError);
  EXPECT_THROW(in.exec(body("        o[...] = frobnicate(x[...])\n")), ExecError);
}
