// Structural verifier: each violation is reported and names the node or value;
// also the graph tables it relies on (lookups, users).
#include <gtest/gtest.h>

#include "ir/verifier.h"

namespace kiln {
namespace {

const TensorType kF32x2{DType::F32, {2}};

void expectViolation(const Graph &g, const std::vector<std::string> &fragments) {
  Status s = verifyStructure(g);
  ASSERT_FALSE(s.isOk()) << "accepted an invalid graph";
  EXPECT_EQ(s.message().rfind("graph '" + g.name() + "'", 0), 0u) << s.message();
  for (const std::string &f : fragments)
    EXPECT_NE(s.message().find(f), std::string::npos)
        << "message lacks '" << f << "': " << s.message();
}

TEST(Verifier, AcceptsAWellFormedGraph) {
  Graph g("ok");
  ValueId x = g.addInput("x", kF32x2, InputRole::Data);
  NodeId split = g.addNode("Split", "s", {x}, {kF32x2, kF32x2});
  NodeId add =
      g.addNode("Add", "a", {g.node(split).outputs[0], g.node(split).outputs[1]}, {kF32x2});
  g.addNode("Print", "p", {g.node(add).outputs[0]}, {});
  g.addOutput("y", g.node(add).outputs[0]);
  g.addOutput("x_again", x);
  Status s = verifyStructure(g);
  EXPECT_TRUE(s.isOk()) << s.message();
}

TEST(Verifier, UseBeforeDefinition) {
  Graph g("g");
  ValueId x = g.addInput("x", kF32x2, InputRole::Data);
  // Value 2 is the output of the second node, which comes after its user.
  g.addNode("Neg", "first", {2}, {kF32x2});
  g.addNode("Neg", "second", {x}, {kF32x2});
  expectViolation(g, {"node 'first'", "uses 'second' before it is defined"});
}

TEST(Verifier, SelfUse) {
  Graph g("g");
  g.addInput("x", kF32x2, InputRole::Data);
  g.addNode("Neg", "loop", {1}, {kF32x2}); // reads its own output
  expectViolation(g, {"node 'loop'", "before it is defined"});
}

TEST(Verifier, InputOutOfRange) {
  Graph g("g");
  g.addInput("x", kF32x2, InputRole::Data);
  g.addNode("Neg", "n", {42}, {kF32x2});
  expectViolation(g, {"node 'n' input 0 refers to no value"});
  Graph h("h");
  h.addNode("Neg", "n", {kNoValue}, {kF32x2});
  expectViolation(h, {"node 'n' input 0 refers to no value"});
}

TEST(Verifier, DuplicateNodeNames) {
  Graph g("g");
  ValueId x = g.addInput("x", kF32x2, InputRole::Data);
  g.addNode("Neg", "n", {x}, {kF32x2});
  g.addNode("Exp", "n", {x}, {kF32x2});
  expectViolation(g, {"duplicate name 'n'"});
}

TEST(Verifier, NodeNamedLikeAnInput) {
  Graph g("g");
  ValueId x = g.addInput("x", kF32x2, InputRole::Data);
  g.addNode("Neg", "x", {x}, {kF32x2});
  expectViolation(g, {"duplicate name 'x'"});
}

TEST(Verifier, DuplicateInputNames) {
  Graph g("g");
  g.addInput("x", kF32x2, InputRole::Data);
  g.addInput("x", kF32x2, InputRole::Parameter);
  expectViolation(g, {"duplicate name 'x'"});
}

// "s#0" is both a node's name and the first output of the multi-output node "s".
TEST(Verifier, MultiOutputValueNameCollision) {
  Graph g("g");
  ValueId x = g.addInput("x", kF32x2, InputRole::Data);
  g.addNode("Split", "s", {x}, {kF32x2, kF32x2});
  g.addNode("Neg", "s#0", {x}, {kF32x2});
  expectViolation(g, {"'s#0'"});

  Graph h("h");
  ValueId y = h.addInput("y", kF32x2, InputRole::Data);
  h.addNode("Neg", "s#1", {y}, {kF32x2});
  h.addNode("Split", "s", {y}, {kF32x2, kF32x2});
  expectViolation(h, {"value name 's#1' of node 's'"});
}

TEST(Verifier, OutputReferringToNothing) {
  Graph g("g");
  ValueId x = g.addInput("x", kF32x2, InputRole::Data);
  g.addNode("Neg", "n", {x}, {kF32x2});
  g.addOutput("y", 99);
  expectViolation(g, {"output 'y' refers to no defined value"});

  Graph h("h");
  h.addInput("x", kF32x2, InputRole::Data);
  h.addOutput("y", kNoValue);
  expectViolation(h, {"output 'y' refers to no defined value"});
}

TEST(Verifier, DuplicateOutputNames) {
  Graph g("g");
  ValueId x = g.addInput("x", kF32x2, InputRole::Data);
  g.addOutput("y", x);
  g.addOutput("y", x);
  expectViolation(g, {"duplicate output name 'y'"});
}

TEST(Verifier, EmptyNamesAndOps) {
  Graph g("g");
  ValueId x = g.addInput("x", kF32x2, InputRole::Data);
  g.addNode("Neg", "", {x}, {kF32x2});
  expectViolation(g, {"node #0 (Neg) has no name"});

  Graph h("h");
  ValueId y = h.addInput("y", kF32x2, InputRole::Data);
  h.addNode("", "n", {y}, {kF32x2});
  expectViolation(h, {"node 'n' has no op"});

  Graph k("k");
  k.addInput("", kF32x2, InputRole::Data);
  expectViolation(k, {"empty name"});
}

TEST(Verifier, NegativeDimensions) {
  Graph g("g");
  ValueId x = g.addInput("x", kF32x2, InputRole::Data);
  g.addNode("Neg", "n", {x}, {{DType::F32, {2, -1}}});
  expectViolation(g, {"node 'n'", "negative dimension", "f32[2,-1]"});

  Graph h("h");
  h.addInput("x", {DType::F16, {-4}}, InputRole::Data);
  expectViolation(h, {"input 'x'", "negative dimension"});
}

// Passes edit nodes in place; the verifier must catch broken tables without reading out of bounds.
TEST(Verifier, InconsistentTables) {
  Graph g("g");
  ValueId x = g.addInput("x", kF32x2, InputRole::Data);
  NodeId a = g.addNode("Neg", "a", {x}, {kF32x2});
  NodeId b = g.addNode("Neg", "b", {x}, {kF32x2});
  g.node(b).outputs[0] = g.node(a).outputs[0];
  expectViolation(g, {"node 'b' output 0 is not recorded as produced by it"});

  g.node(b).outputs[0] = 1234;
  expectViolation(g, {"node 'b' output 0 refers to no value"});

  Graph h("h");
  ValueId y = h.addInput("y", kF32x2, InputRole::Data);
  NodeId n = h.addNode("Neg", "n", {y}, {kF32x2});
  h.node(n).outputs.push_back(y); // claims a graph input as its output
  expectViolation(h, {"node 'n' output 1 is not recorded as produced by it"});
}

TEST(GraphTables, FindNodeAfterRename) {
  Graph g("g");
  ValueId x = g.addInput("x", kF32x2, InputRole::Data);
  NodeId a = g.addNode("Neg", "a", {x}, {kF32x2});
  NodeId b = g.addNode("Neg", "b", {x}, {kF32x2});
  EXPECT_EQ(g.findNode("a"), a);
  EXPECT_EQ(g.findNode("b"), b);
  // node() hands out a mutable node; the old name must not find it any more.
  g.node(a).name = "renamed";
  EXPECT_EQ(g.findNode("a"), kNoNode);
  EXPECT_EQ(g.findNode("renamed"), a);
  NodeId c = g.addNode("Neg", "c", {x}, {kF32x2});
  EXPECT_EQ(g.findNode("c"), c);
  EXPECT_EQ(g.findNode("missing"), kNoNode);
  EXPECT_NE(g.findInput("x"), nullptr);
  EXPECT_EQ(g.findInput("a"), nullptr);
}

TEST(GraphTables, UsersAndParameterCount) {
  Graph g("g");
  ValueId x = g.addInput("x", kF32x2, InputRole::Data);
  ValueId w = g.addInput("w", {DType::F32, {3, 4}}, InputRole::Parameter);
  g.addInput("b", {DType::F16, {5}}, InputRole::Parameter);
  g.addInput("m", {DType::F32, {3, 4}}, InputRole::OptimizerState);
  NodeId n = g.addNode("Mul", "sq", {x, x}, {kF32x2});
  NodeId u = g.addNode("Use", "u", {w, g.node(n).outputs[0]}, {});
  auto users = g.computeUsers();
  EXPECT_EQ(users[x], (std::vector<NodeId>{n, n}));
  EXPECT_EQ(users[w], (std::vector<NodeId>{u}));
  EXPECT_EQ(users[g.node(n).outputs[0]], (std::vector<NodeId>{u}));
  EXPECT_EQ(g.parameterCount(), 3 * 4 + 5);
}

} // namespace
} // namespace kiln
