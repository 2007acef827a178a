#pragma once
/// The canonical `.pk` printer: `pipecheck fmt`. print(parse(x)) is a fixed
/// point, and parse(print(ir)) == ir. Comments attached to nodes are kept.

#include "spec/ir.hpp"

#include <iosfwd>
#include <map>
#include <string>

namespace pipecheck::spec {

std::string print(const File &);
std::string print(const KernelSpec &);
std::string print(const Program &);
std::string print(const Stmt &, int indent = 0);
/// An expression with the fewest parentheses that keep its structure.
std::string print(const Expr &);

/// While one lives, print(Expr) (every message that quotes an expression)
/// prints a ref of a hoisted local of these blocks (Let::hoisted) as the
/// subscripted expression it stands for: `max(x[...], axis=1)[:, None]`, not
/// `__sub0[:, None]`. Scopes nest; the innermost names win.
class HoistedNames {
public:
  explicit HoistedNames(const Block &body, const Block &more = {});
  ~HoistedNames();
  HoistedNames(const HoistedNames &) = delete;
  HoistedNames &operator=(const HoistedNames &) = delete;

private:
  void add(const Block &b);
  std::map<std::string, Expr> values_;
  std::map<std::string, Expr> *outer_;
};

} // namespace pipecheck::spec
