#pragma once
/// Internal to verifier/smt: ties a z3::context to the process-wide interrupt
/// of smt::interrupt_all(), so a query running in it stops when it is called.

#include <z3++.h>

namespace pipecheck::verifier::smt {

/// Registers a context for the lifetime of this object; a context registered
/// after interrupt_all() is interrupted at once.
class InterruptScope {
public:
  explicit InterruptScope(z3::context &);
  ~InterruptScope();
  InterruptScope(const InterruptScope &) = delete;
  InterruptScope &operator=(const InterruptScope &) = delete;

private:
  z3::context &c_;
};

} // namespace pipecheck::verifier::smt
