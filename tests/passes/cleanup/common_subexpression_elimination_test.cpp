// CommonSubexpressionEliminationPass: equal nodes merge into the first one,
// chains of duplicates merge in one run, and anything that differs in op,
// inputs, attribute bits, group or type stays apart.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "ops/op_builder.h"
#include "passes/cleanup/common_subexpression_elimination.h"
#include "tests/passes/cleanup/cleanup_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

using Ints = std::vector<int64_t>;
const char *kPass = "CommonSubexpressionEliminationPass";

bool exists(const Graph &g, const std::string &name) { return g.findNode(name) != kNoNode; }

std::string inputName(const Graph &g, const std::string &node, size_t i) {
  return g.valueName(g.node(g.findNode(node)).inputs.at(i));
}

TEST(CommonSubexpressionElimination, DuplicateFillsMergeIntoTheFirst) {
  Graph g("t");
  TensorType type{DType::F32, {4}};
  ValueId x = g.addInput("x", type, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId eps0 = b.constant(1e-6, DType::F32, "h0.eps");
  ValueId eps1 = b.constant(1e-6, DType::F32, "h1.eps");
  ValueId other = b.constant(2e-6, DType::F32, "other");
  ValueId zero = b.constant(0.0, DType::F32, "zero");
  ValueId neg_zero = b.constant(-0.0, DType::F32, "neg_zero");
  ValueId wide = b.constant(1e-6, DType::F32, "wide", {4});
  ValueId half = b.constant(1e-6, DType::F16, "half");
  g.addOutput("a", b.create("Add", "a", {x, eps0}));
  g.addOutput("b", b.create("Add", "b", {x, eps1}));
  g.addOutput("c", b.create("Add", "c", {x, other}));
  // 1/x tells +0 from -0: merging them would change results.
  g.addOutput("d", b.create("Div", "d", {x, zero}));
  g.addOutput("e", b.create("Div", "e", {x, neg_zero}));
  g.addOutput("f", b.create("Add", "f", {x, wide}));
  g.addOutput("h", b.create("Cast", "h", {half}, {{"dtype", DType::F32}}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  const Graph before = g;

  passes::PassResult r = runOnePass(g, kPass);
  // h1.eps merges into h0.eps, and then Add b equals Add a.
  EXPECT_EQ(r.match_times, 2);
  EXPECT_EQ(r.effect_times, 2);
  EXPECT_EQ(r.statistics.at("nodes_removed"), 2);
  EXPECT_EQ(r.statistics.at("merged_Fill"), 1);
  EXPECT_EQ(r.statistics.at("merged_Add"), 1);
  EXPECT_TRUE(exists(g, "h0.eps"));
  EXPECT_FALSE(exists(g, "h1.eps"));
  EXPECT_FALSE(exists(g, "b"));
  EXPECT_EQ(g.valueName(g.findOutput("b")->value), "a");
  for (const char *kept : {"other", "zero", "neg_zero", "wide", "half", "c", "d", "e", "f", "h"})
    EXPECT_TRUE(exists(g, kept)) << kept;
  ops::TensorMap feed{{"x", Tensor::fromFloats(DType::F32, {4}, {1.0f, -2.0f, 0.5f, 3.0f})}};
  EXPECT_TRUE(sameResults(before, g, feed));
}

TEST(CommonSubexpressionElimination, ChainsOfDuplicatesMergeInOneRun) {
  Graph g("t");
  TensorType type{DType::F32, {2, 3}};
  ValueId x = g.addInput("x", type, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId c1 = b.create("Cast", "c1", {x}, {{"dtype", DType::F16}});
  ValueId c2 = b.create("Cast", "c2", {x}, {{"dtype", DType::F16}});
  ValueId c3 = b.create("Cast", "c3", {x}, {{"dtype", DType::BF16}});
  ValueId r1 = b.create("Reshape", "r1", {c1}, {{"shape", Ints{6}}});
  ValueId r2 = b.create("Reshape", "r2", {c2}, {{"shape", Ints{6}}});
  ValueId r3 = b.create("Reshape", "r3", {c2}, {{"shape", Ints{3, 2}}});
  g.addOutput("y", b.create("Sub", "s", {r1, r2}));
  g.addOutput("z", b.create("Exp", "e", {r3}));
  g.addOutput("w", c3);
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  const Graph before = g;

  passes::PassResult r = runOnePass(g, kPass);
  EXPECT_EQ(r.effect_times, 2); // c2 into c1, then r2 into r1
  EXPECT_FALSE(exists(g, "c2"));
  EXPECT_FALSE(exists(g, "r2"));
  EXPECT_EQ(inputName(g, "s", 0), "r1");
  EXPECT_EQ(inputName(g, "s", 1), "r1");
  EXPECT_EQ(inputName(g, "r3", 0), "c1");
  EXPECT_TRUE(exists(g, "c3"));
  EXPECT_TRUE(sameResults(before, g, {{"x", randomTensor(type, 3)}}));
}

TEST(CommonSubexpressionElimination, MultiOutputNodesMergeOutputByOutput) {
  Graph g("t");
  TensorType type{DType::F32, {4, 2}};
  ValueId x = g.addInput("x", type, InputRole::Data);
  ops::OpBuilder b(g);
  AttrMap split{{"axis", int64_t{0}}, {"sizes", Ints{1, 3}}};
  std::vector<ValueId> s1 = b.createMulti("Split", "s1", {x}, split);
  std::vector<ValueId> s2 = b.createMulti("Split", "s2", {x}, split);
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  g.addOutput("a", b.create("Neg", "a", {s2[0]}));
  g.addOutput("b", b.create("Exp", "b", {s2[1]}));
  g.addOutput("c", s1[1]);
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  const Graph before = g;
  passes::PassResult r = runOnePass(g, kPass);
  EXPECT_EQ(r.effect_times, 1);
  EXPECT_EQ(inputName(g, "a", 0), "s1#0");
  EXPECT_EQ(inputName(g, "b", 0), "s1#1");
  EXPECT_TRUE(sameResults(before, g, {{"x", randomTensor(type, 4)}}));
}

TEST(CommonSubexpressionElimination, BitIdenticalNanConstantsMerge) {
  // Through the driver: ops::verifyGraph rejects NaN attributes (NaN != NaN).
  Graph g("t");
  ops::OpBuilder b(g);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  ValueId n1 = b.constant(nan, DType::F32, "n1", {2});
  ValueId n2 = b.constant(nan, DType::F32, "n2", {2});
  g.addOutput("y", b.create("Add", "y", {n1, n2}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  passes::PassResult r = passes::eliminateCommonSubexpressions(g);
  EXPECT_EQ(r.effect_times, 1);
  ASSERT_TRUE(g.compact().isOk());
  EXPECT_EQ(inputName(g, "y", 1), "n1");
  EXPECT_TRUE(std::isnan(interpretOk(g, {}).at("y").getFloat(0)));
}

TEST(CommonSubexpressionElimination, NodesOfDifferentGroupsStayApart) {
  Graph g("t");
  TensorType type{DType::F32, {3}};
  ValueId x = g.addInput("x", type, InputRole::Data);
  ops::OpBuilder b(g);
  g.addOutput("a", b.create("Exp", "a", {x}));
  g.addOutput("b", b.create("Exp", "b", {x}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  GroupId grp = g.addGroup(FusionGroup{"fused.b", "eltwise", "test", Intermediates::F32});
  g.node(g.findNode("b")).group = grp;
  const std::string text = textOf(g);
  passes::PassResult r = runOnePass(g, kPass);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_EQ(textOf(g), text);
}

TEST(CommonSubexpressionElimination, MergesThousandsOfCopiesInOneRun) {
  // 20000 layers, each with its own copy of one constant.
  Graph g("t");
  TensorType type{DType::F32, {2}};
  ValueId x = g.addInput("x", type, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId v = x;
  const int layers = 20000;
  for (int i = 0; i < layers; ++i)
    v = b.create("Mul", "m" + std::to_string(i),
                 {v, b.constant(0.5, DType::F32, "k" + std::to_string(i))});
  g.addOutput("y", v);
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  passes::PassResult r = runOnePass(g, kPass);
  EXPECT_EQ(r.effect_times, layers - 1);
  EXPECT_EQ(g.numNodes(), static_cast<size_t>(layers + 1));
}

TEST(CommonSubexpressionElimination, SwitchedOffLeavesTheGraphUnchanged) {
  Graph g("t");
  ValueId x = g.addInput("x", TensorType{DType::F32, {3}}, InputRole::Data);
  ops::OpBuilder b(g);
  g.addOutput("a", b.create("Exp", "a", {x}));
  g.addOutput("b", b.create("Exp", "b", {x}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  expectSwitchDecides(g, kPass);
}

} // namespace
} // namespace kiln::testing
