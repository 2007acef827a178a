#pragma once
/// The happens-before graph of one concrete pipeline run (Boost.Graph; this
/// folder is pipecheck's only Boost.Graph user).
///
/// Nodes are issued statements (the single issuing thread's events, chained in
/// program order) and asynchronous operations (a copy or a wgmma: start -> op
/// -> the wait that retires it; wgmmas on one accumulator chained in issue
/// order). An access happens before another exactly when a path joins their
/// nodes; two conflicting accesses that no path orders race.

#include <cstddef>
#include <memory>

namespace pipecheck::verifier::hb {

class Graph {
public:
  Graph();
  ~Graph();
  Graph(Graph &&) noexcept;
  Graph &operator=(Graph &&) noexcept;

  /// Adds a node and returns its id (ids are dense, from 0).
  int add_node();
  /// Adds the edge `from -> to` (from happens before to).
  void add_edge(int from, int to);
  std::size_t num_nodes() const;
  std::size_t num_edges() const;
  /// True when a (possibly empty) path leads from `from` to `to`.
  bool reaches(int from, int to) const;
  /// True when neither node reaches the other.
  bool unordered(int a, int b) const { return !reaches(a, b) && !reaches(b, a); }

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace pipecheck::verifier::hb
