#include "verifier/hb/hb.hpp"

#include <gtest/gtest.h>

using pipecheck::verifier::hb::Graph;

TEST(HappensBeforeGraph, OrdersNodesAlongAPathOnly) {
  Graph g;
  int start = g.add_node(), op = g.add_node(), compute = g.add_node(), wait = g.add_node();
  g.add_edge(start, compute);
  g.add_edge(compute, wait);
  g.add_edge(start, op);
  g.add_edge(op, wait);
  EXPECT_TRUE(g.reaches(start, wait));
  EXPECT_TRUE(g.reaches(op, wait));
  EXPECT_FALSE(g.reaches(wait, start));
  EXPECT_TRUE(g.unordered(op, compute));
  EXPECT_FALSE(g.unordered(start, compute));
  EXPECT_EQ(g.num_nodes(), 4u);
  EXPECT_EQ(g.num_edges(), 4u);
}

TEST(HappensBeforeGraph, EveryNodeReachesItself) {
  Graph g;
  int a = g.add_node();
  EXPECT_TRUE(g.reaches(a, a));
  EXPECT_FALSE(g.unordered(a, a));
}
