#include "executor/interp.hpp"

#include "testing.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

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

TEST(Interp, ANegativeIndexIsAFaultNotTheLastRow) {
  HostArray x("x", spec::DType::f32, {4, 8});
  Arrays mem;
  mem.m["x"] = &x;
  Interp in(mem);
  in.env["i"] = 0;
  const auto b = body("        o[...] = x[i - 1]\n        o[...] = x[:, -8:]\n");
  for (int k = 0; k < 2; ++k) {
    try {
      in.view_of(std::get<spec::Assign>(b[static_cast<std::size_t>(k)].kind).value);
      ADD_FAILURE() << "statement " << k << " did not fault";
    } catch (const ExecError &e) {
      EXPECT_EQ(e.kind, ExecError::Kind::fault);
      EXPECT_NE(
          std::string(e.what()).find(k == 0 ? "index -1 is out of bounds for dim 0 (extent 4) of x[4, 8]"
                                            : "slice -8:8 is out of bounds for dim 1 (extent 8) of x[4, 8]"),
          std::string::npos)
          << e.what();
    }
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

namespace {

/// Records the order of the runner hooks.
class Hooked : public Arrays {
public:
  std::vector<std::string> log;
  void before_read(const View &v) override { log.push_back("read " + v.to_string()); }
  void before_write(const View &v) override { log.push_back("write " + v.to_string()); }
};

std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }

} // namespace

TEST(Interp, ElementwiseStatementsGiveTheFloatsOfWholeBlockOperations) {
  // More elements than one evaluation chunk, so chunk edges are crossed.
  HostArray x("x", spec::DType::f32, {64, 100}), y("y", spec::DType::f32, {64, 100}),
      o("o", spec::DType::f32, {64, 100}), p("p", spec::DType::f32, {64, 100});
  x.fill_random(4);
  y.fill_random(5);
  o.fill_poison();
  p.fill_poison();
  Arrays mem;
  mem.m = {{"x", &x}, {"y", &y}, {"o", &o}, {"p", &p}};
  Interp in(mem);
  in.exec(body("        o[...] = x[...] * 2.5 - y[...] / x[...] + 1\n"
               "        t = x[...] + y[...]\n"
               "        t = t * 0.999 + 0.001\n"
               "        t = -t\n"
               "        p[...] = t\n"
               "        p[...] += y[...] * 3\n"));
  const Value xv = load(View::whole(x)), yv = load(View::whole(y));
  const Value ov =
      binary(BinOp::add,
             binary(BinOp::sub, binary(BinOp::mul, xv, Value::scalar_float(2.5)), binary(BinOp::div, yv, xv)),
             Value::scalar_int(1));
  Value tv = binary(BinOp::add, xv, yv);
  tv = binary(BinOp::add, binary(BinOp::mul, tv, Value::scalar_float(0.999)), Value::scalar_float(0.001));
  tv = unary(UnOp::neg, tv);
  const Value pv = binary(BinOp::add, tv, binary(BinOp::mul, yv, Value::scalar_int(3)));
  for (std::int64_t k = 0; k < x.size(); ++k) {
    ASSERT_EQ(bits(static_cast<float>(o.get(k))), bits(ov.f[k])) << k;
    ASSERT_EQ(bits(static_cast<float>(p.get(k))), bits(pv.f[k])) << k;
    ASSERT_EQ(bits(in.locals.at("t").f[k]), bits(tv.f[k])) << k;
  }
}

TEST(Interp, AStoreIntoAShiftedWindowOfItsOwnOperandReadsTheWholeOperandFirst) {
  HostArray a("a", spec::DType::f32, {10000});
  for (std::int64_t k = 0; k < a.size(); ++k)
    a.set(k, static_cast<double>(2 * k));
  Arrays mem;
  mem.m = {{"a", &a}};
  Interp in(mem);
  in.exec(body("        a[1:10000] = a[0:9999] + 1\n"));
  EXPECT_EQ(a.get(0), 0);
  for (std::int64_t k = 1; k < a.size(); ++k)
    ASSERT_EQ(a.get(k), static_cast<double>(2 * k - 1)) << k; // a_old[k - 1] + 1, not new values
}

TEST(Interp, AnElementwiseStatementOrdersItsReadsBeforeItsWrite) {
  HostArray x("x", spec::DType::f32, {4, 8}), y("y", spec::DType::f32, {4, 8}),
      o("o", spec::DType::f32, {4, 8});
  x.fill_random(1);
  y.fill_random(2);
  o.fill_zero();
  Hooked mem;
  mem.m = {{"x", &x}, {"y", &y}, {"o", &o}};
  Interp in(mem);
  in.exec(body("        o[...] += x[...] + y[...]\n"));
  EXPECT_EQ(mem.log,
            (std::vector<std::string>{"read x[:, :]", "read y[:, :]", "read o[:, :]", "write o[:, :]"}));
  EXPECT_EQ(static_cast<float>(o.get(9)), static_cast<float>(x.get(9)) + static_cast<float>(y.get(9)));
}
