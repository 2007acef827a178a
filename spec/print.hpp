#pragma once
/// The canonical `.pk` printer: `pipecheck fmt`. print(parse(x)) is a fixed
/// point, and parse(print(ir)) == ir. Comments attached to nodes are kept.

#include "spec/ir.hpp"

#include <iosfwd>
#include <string>

namespace pipecheck::spec {

std::string print(const File &);
std::string print(const KernelSpec &);
std::string print(const Program &);
std::string print(const Stmt &, int indent = 0);
/// An expression with the fewest parentheses that keep its structure.
std::string print(const Expr &);

} // namespace pipecheck::spec
