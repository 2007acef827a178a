#include "verifier/hb/hb.hpp"

#include <boost/graph/adjacency_list.hpp>

#include <cassert>
#include <vector>

namespace pipecheck::verifier::hb {

struct Graph::Impl {
  boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS> g;
};

Graph::Graph() : impl_(std::make_unique<Impl>()) {}
Graph::~Graph() = default;
Graph::Graph(Graph &&) noexcept = default;
Graph &Graph::operator=(Graph &&) noexcept = default;

int Graph::add_node() { return static_cast<int>(boost::add_vertex(impl_->g)); }

void Graph::add_edge(int from, int to) {
  assert(from >= 0 && to >= 0);
  assert(static_cast<std::size_t>(from) < num_nodes() && static_cast<std::size_t>(to) < num_nodes());
  boost::add_edge(static_cast<std::size_t>(from), static_cast<std::size_t>(to), impl_->g);
}

std::size_t Graph::num_nodes() const { return boost::num_vertices(impl_->g); }
std::size_t Graph::num_edges() const { return boost::num_edges(impl_->g); }

bool Graph::reaches(int from, int to) const {
  if (from == to) return true;
  // Node ids grow with issue order and every edge points forward in it, so a
  // search may prune nodes past the target.
  const auto &g = impl_->g;
  std::vector<char> seen(num_nodes(), 0);
  std::vector<std::size_t> stack{static_cast<std::size_t>(from)};
  seen[static_cast<std::size_t>(from)] = 1;
  while (!stack.empty()) {
    auto u = stack.back();
    stack.pop_back();
    for (auto [it, end] = boost::adjacent_vertices(u, g); it != end; ++it) {
      auto v = *it;
      if (v == static_cast<std::size_t>(to)) return true;
      if (seen[v] || v > static_cast<std::size_t>(to)) continue;
      seen[v] = 1;
      stack.push_back(v);
    }
  }
  return false;
}

} // namespace pipecheck::verifier::hb
