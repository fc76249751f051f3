// The graph reducer's edits keep graphs valid and what kept nodes compute;
// the search reaches a 1-minimal graph on a scripted failure, with and
// without a focus, and stops at its trial budget.
#include <gtest/gtest.h>

#include "debug/graph_reducer.h"
#include "ops/op_builder.h"
#include "ops/op_verifier.h"

namespace kiln::testing {
namespace {

// x [4, 16] -> Exp -> Neg -> Mul(., w) -> ReduceSum(axis 1) -> out;
// also Sqrt(x) -> side.
Graph chain() {
  Graph g("chain");
  ops::OpBuilder b(g);
  ValueId x = g.addInput("x", {DType::F32, {4, 16}}, InputRole::Data);
  ValueId w = g.addInput("w", {DType::F32, {16}}, InputRole::Parameter);
  ValueId e = b.create("Exp", "e", {x});
  ValueId n = b.create("Neg", "n", {e});
  ValueId m = b.create("Mul", "m", {n, w});
  ValueId r = b.create("ReduceSum", "r", {m}, {{"axes", std::vector<int64_t>{1}}});
  ValueId s = b.create("Sqrt", "s", {x});
  EXPECT_TRUE(b.status().isOk()) << b.status().message();
  g.addOutput("out", r);
  g.addOutput("side", s);
  return g;
}

TEST(GraphReducer, DroppingANodeMakesWhatItMadeAnInput) {
  Graph g = chain();
  auto cut = debug::dropNodes(g, {g.findNode("n")});
  ASSERT_TRUE(cut.isOk()) << cut.message();
  EXPECT_EQ(cut->numNodes(), 4u); // m, r, s and ... e feeds only n: it becomes an output
  ASSERT_NE(cut->findInput("n"), nullptr);
  EXPECT_EQ(cut->type(cut->findInput("n")->value), (TensorType{DType::F32, {4, 16}}));
  EXPECT_NE(cut->findOutput("e"), nullptr) << "a value whose readers were all dropped is kept";
  EXPECT_TRUE(ops::verifyGraph(*cut).isOk());
}

TEST(GraphReducer, DroppingOutputsDropsWhatOnlyFedThem) {
  Graph g = chain();
  auto cut = debug::dropOutputs(g, {0});
  ASSERT_TRUE(cut.isOk()) << cut.message();
  ASSERT_EQ(cut->numNodes(), 1u);
  EXPECT_EQ(cut->node(0).name, "s");
  EXPECT_EQ(cut->inputs().size(), 1u) << "w is read by nothing left";
  EXPECT_FALSE(debug::dropOutputs(g, {0, 1}).isOk()) << "nothing would be left";
}

TEST(GraphReducer, ShrinkingAnExtentInfersEveryType) {
  Graph g = chain();
  auto small = debug::shrinkExtent(g, 16, 2);
  ASSERT_TRUE(small.isOk()) << small.message();
  EXPECT_EQ(small->type(small->findInput("w")->value).shape, (Shape{2}));
  EXPECT_EQ(small->type(small->node(small->findNode("m")).outputs[0]).shape, (Shape{4, 2}));
  EXPECT_FALSE(debug::shrinkExtent(g, 7, 1).isOk()) << "no input has extent 7";

  // A Reshape spells out its shape: shrinking under it is refused.
  Graph r("reshape");
  ops::OpBuilder b(r);
  ValueId x = r.addInput("x", {DType::F32, {4, 16}}, InputRole::Data);
  r.addOutput("y", b.create("Reshape", "y", {x}, {{"shape", std::vector<int64_t>{64}}}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  EXPECT_FALSE(debug::shrinkExtent(r, 16, 8).isOk());
}

// Fails while some Neg reads a value whose last extent is at least 4.
Expected<bool> negOfWideValue(const Graph &g) {
  for (const Node &n : g.nodes())
    if (n.op == "Neg" && g.type(n.inputs[0]).shape.back() >= 4)
      return true;
  return false;
}

TEST(GraphReducer, ReachesTheOneNodeThatFailsAndTheSmallestShape) {
  auto r = debug::reduceGraph(chain(), negOfWideValue);
  ASSERT_TRUE(r.isOk()) << r.message();
  ASSERT_EQ(r->graph.numNodes(), 1u);
  EXPECT_EQ(r->graph.node(0).op, "Neg");
  EXPECT_EQ(r->graph.type(r->graph.node(0).inputs[0]).shape, (Shape{1, 4}))
      << "4 rows shrink to 1; 16 columns halve to 4, not below";
  EXPECT_EQ(r->nodes_before, 5u);
  EXPECT_FALSE(r->log.empty());
  EXPECT_TRUE(ops::verifyGraph(r->graph).isOk());
}

TEST(GraphReducer, AFocusThatFailsIsOneTrial) {
  debug::ReduceOptions options;
  options.focus = {"n"};
  int calls = 0;
  auto counted = [&](const Graph &g) {
    ++calls;
    return negOfWideValue(g);
  };
  auto r = debug::reduceGraph(chain(), counted, options);
  ASSERT_TRUE(r.isOk()) << r.message();
  EXPECT_EQ(r->graph.numNodes(), 1u);
  EXPECT_EQ(r->log.front(), "kept only the failing kernel's ops: 1 nodes left");
  EXPECT_EQ(calls, r->trials);
}

TEST(GraphReducer, AGraphThatDoesNotFailIsAnError) {
  auto r = debug::reduceGraph(chain(), [](const Graph &) -> Expected<bool> { return false; });
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.message().find("does not fail"), std::string::npos);
}

TEST(GraphReducer, StopsAtTheTrialBudget) {
  debug::ReduceOptions options;
  options.max_trials = 3;
  auto r = debug::reduceGraph(chain(), negOfWideValue, options);
  ASSERT_TRUE(r.isOk()) << r.message();
  EXPECT_LE(r->trials, 3);
}

TEST(GraphReducer, APredicateErrorAborts) {
  auto r = debug::reduceGraph(
      chain(), [](const Graph &) -> Expected<bool> { return Error("the compiler crashed"); });
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.message(), "the compiler crashed");
}

} // namespace
} // namespace kiln::testing
