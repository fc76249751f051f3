// DeadCodeEliminationPass: what no graph output needs goes, what one needs
// stays (a multi-output node lives when any output is used), inputs stay.
#include <gtest/gtest.h>

#include "ops/op_builder.h"
#include "passes/cleanup/dead_code_elimination.h"
#include "tests/passes/cleanup/cleanup_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

using Ints = std::vector<int64_t>;
const char *kPass = "DeadCodeEliminationPass";

bool exists(const Graph &g, const std::string &name) { return g.findNode(name) != kNoNode; }

TEST(DeadCodeElimination, RemovesWhatNoOutputNeeds) {
  Graph g("t");
  TensorType type{DType::F32, {4, 2}};
  ValueId x = g.addInput("x", type, InputRole::Data);
  g.addInput("unused", type, InputRole::Parameter);
  ops::OpBuilder b(g);
  // Dead: a chain hanging off x, and a constant nobody reads.
  ValueId d1 = b.create("Exp", "dead1", {x});
  b.create("Neg", "dead2", {d1});
  b.constant(1.0, DType::F32, "dead_const");
  // Live: Split whose second output only is read, through a chain.
  std::vector<ValueId> parts =
      b.createMulti("Split", "split", {x}, {{"axis", int64_t{0}}, {"sizes", Ints{1, 3}}});
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  ValueId live = b.create("Mul", "live", {parts[1], b.constant(2.0, DType::F32, "two")});
  g.addOutput("y", live);
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  const Graph before = g;

  passes::PassResult r = runOnePass(g, kPass);
  EXPECT_EQ(r.match_times, 3);
  EXPECT_EQ(r.effect_times, 3);
  EXPECT_EQ(r.statistics.at("nodes_removed"), 3);
  for (const char *gone : {"dead1", "dead2", "dead_const"})
    EXPECT_FALSE(exists(g, gone)) << gone;
  for (const char *kept : {"split", "two", "live"})
    EXPECT_TRUE(exists(g, kept)) << kept;
  EXPECT_EQ(g.inputs().size(), 2u);
  ops::TensorMap feed{{"x", randomTensor(type, 1)}, {"unused", randomTensor(type, 2)}};
  EXPECT_TRUE(sameResults(before, g, feed));
}

TEST(DeadCodeElimination, AllLiveGraphIsUnchanged) {
  Graph g("t");
  ValueId x = g.addInput("x", TensorType{DType::F32, {3}}, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId e = b.create("Exp", "e", {x});
  g.addOutput("y", b.create("Add", "y", {e, x}));
  g.addOutput("e", e);
  const std::string text = textOf(g);
  passes::PassResult r = runOnePass(g, kPass);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_EQ(textOf(g), text);
}

TEST(DeadCodeElimination, NeedsNoNodeOrder) {
  // A node appended last feeds an earlier one, as a pass may leave the graph.
  Graph g("t");
  ValueId x = g.addInput("x", TensorType{DType::F32, {3}}, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId n = b.create("Neg", "n", {x});
  b.create("Exp", "dead", {n});
  ValueId e = b.create("Exp", "late", {x});
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  g.setInput(g.findNode("n"), 0, e);
  g.addOutput("y", n);
  passes::PassResult r = passes::eliminateDeadCode(g);
  EXPECT_EQ(r.effect_times, 1);
  ASSERT_TRUE(g.compact().isOk());
  EXPECT_TRUE(exists(g, "late"));
  EXPECT_FALSE(exists(g, "dead"));
  EXPECT_EQ(g.node(0).name, "late");
}

TEST(DeadCodeElimination, SwitchedOffLeavesTheGraphUnchanged) {
  Graph g("t");
  ValueId x = g.addInput("x", TensorType{DType::F32, {3}}, InputRole::Data);
  ops::OpBuilder b(g);
  b.create("Exp", "dead", {x});
  g.addOutput("y", b.create("Neg", "n", {x}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  expectSwitchDecides(g, kPass);
}

} // namespace
} // namespace kiln::testing
