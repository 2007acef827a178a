#include "spec/opaque.hpp"

namespace pipecheck::spec {

namespace {

void scan(const Expr &e, std::vector<OpaqueOp> &out) {
  if (e.op == Op::Call && e.name == "opaque") {
    const Expr *op = e.kwarg("op");
    out.push_back(OpaqueOp{op && op->op == Op::Name ? op->name : std::string("?"), e.loc});
  }
  for (const auto &a : e.args)
    scan(a, out);
}

// get_if rather than visit: a statement kind added later holds no opaque call
// until it is taught here.
void scan(const Block &b, std::vector<OpaqueOp> &out) {
  for (const auto &st : b) {
    if (const auto *a = std::get_if<Assign>(&st.kind)) {
      scan(a->target, out);
      scan(a->value, out);
    } else if (const auto *l = std::get_if<Let>(&st.kind)) {
      scan(l->value, out);
    } else if (const auto *i = std::get_if<If>(&st.kind)) {
      scan(i->cond, out);
      scan(i->then_body, out);
      scan(i->else_body, out);
    } else if (const auto *f = std::get_if<For>(&st.kind)) {
      scan(f->lo, out);
      scan(f->hi, out);
      scan(f->body, out);
    } else if (const auto *e = std::get_if<EmitPipeline>(&st.kind)) {
      scan(e->body, out);
    }
  }
}

} // namespace

std::vector<OpaqueOp> opaque_ops(const KernelSpec &k) {
  std::vector<OpaqueOp> out;
  scan(k.body, out);
  scan(k.reference, out);
  return out;
}

std::vector<OpaqueOp> opaque_ops(const Program &p) {
  std::vector<OpaqueOp> out;
  scan(p.body, out);
  return out;
}

std::string describe(const std::vector<OpaqueOp> &ops) {
  std::string s;
  for (const auto &o : ops)
    s += (s.empty() ? "" : ", ") + o.op + " at line " + std::to_string(o.loc.line);
  return s;
}

} // namespace pipecheck::spec
