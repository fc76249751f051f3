// ReshapeTransposeFoldingPass: Reshape and Transpose chains collapse into one
// node that keeps the outer name and records what it stands for; identity
// Reshapes and Transposes disappear; results stay bit for bit the same.
#include <gtest/gtest.h>

#include "ops/op_builder.h"
#include "passes/cleanup/reshape_transpose_folding.h"
#include "tests/passes/cleanup/cleanup_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

using Ints = std::vector<int64_t>;
const char *kPass = "ReshapeTransposeFoldingPass";

struct Built {
  Graph graph{"t"};
  ValueId x = kNoValue;
  ops::TensorMap feed;
};

// An input x: f32[2,3,4] with random data.
Built withInput() {
  Built b;
  TensorType type{DType::F32, {2, 3, 4}};
  b.x = b.graph.addInput("x", type, InputRole::Data);
  b.feed["x"] = randomTensor(type, 5);
  return b;
}

const Node &nodeNamed(const Graph &g, const std::string &name) {
  NodeId id = g.findNode(name);
  EXPECT_NE(id, kNoNode) << name;
  return g.node(id == kNoNode ? 0 : id);
}

// Name of the value `node` reads at input `i`.
std::string inputName(const Graph &g, const std::string &node, size_t i = 0) {
  return g.valueName(nodeNamed(g, node).inputs.at(i));
}

TEST(ReshapeTransposeFolding, ReshapeOfReshapeReadsTheFirstInput) {
  Built t = withInput();
  ops::OpBuilder b(t.graph);
  ValueId r1 = b.create("Reshape", "r1", {t.x}, {{"shape", Ints{6, 4}}});
  ValueId r2 = b.create("Reshape", "r2", {r1}, {{"shape", Ints{4, -1}}});
  t.graph.addOutput("y", b.create("Exp", "e", {r2}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  const Graph before = t.graph;

  passes::PassResult r = runOnePass(t.graph, kPass);
  EXPECT_EQ(r.match_times, 1);
  EXPECT_EQ(r.effect_times, 2); // r2 rewritten, r1 removed
  EXPECT_EQ(r.statistics.at("reshapes_composed"), 1);
  EXPECT_EQ(r.statistics.at("nodes_removed"), 1);
  EXPECT_EQ(t.graph.findNode("r1"), kNoNode);
  EXPECT_EQ(inputName(t.graph, "r2"), "x");
  EXPECT_EQ(t.graph.type(nodeNamed(t.graph, "r2").outputs[0]).shape, (Shape{4, 6}));
  EXPECT_EQ(provenanceOf(t.graph, "r2"), "ReshapeTransposeFoldingPass <- r2, r1");
  EXPECT_TRUE(sameResults(before, t.graph, t.feed));
}

TEST(ReshapeTransposeFolding, LongChainsFoldInOneRunAndKeepEveryOrigin) {
  Built t = withInput();
  ops::OpBuilder b(t.graph);
  ValueId v = t.x;
  const std::vector<Ints> shapes = {{24}, {4, 6}, {2, 2, 6}, {12, 2}};
  for (size_t i = 0; i < shapes.size(); ++i)
    v = b.create("Reshape", "r" + std::to_string(i), {v}, {{"shape", shapes[i]}});
  t.graph.addOutput("y", v);
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  const Graph before = t.graph;

  passes::PassResult r = runOnePass(t.graph, kPass);
  EXPECT_EQ(r.match_times, 3);
  EXPECT_EQ(r.effect_times, 4); // r1..r3 rewritten, r0..r2 removed: 4 nodes touched
  EXPECT_EQ(t.graph.numNodes(), 1u);
  EXPECT_EQ(inputName(t.graph, "r3"), "x");
  EXPECT_EQ(provenanceOf(t.graph, "r3"), "ReshapeTransposeFoldingPass <- r3, r2, r1, r0");
  EXPECT_TRUE(sameResults(before, t.graph, t.feed));
}

TEST(ReshapeTransposeFolding, InnerNodeWithOtherUsersStays) {
  Built t = withInput();
  ops::OpBuilder b(t.graph);
  ValueId r1 = b.create("Reshape", "r1", {t.x}, {{"shape", Ints{6, 4}}});
  t.graph.addOutput("y", b.create("Reshape", "r2", {r1}, {{"shape", Ints{24}}}));
  t.graph.addOutput("z", b.create("Exp", "e", {r1}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  const Graph before = t.graph;
  passes::PassResult r = runOnePass(t.graph, kPass);
  EXPECT_EQ(r.effect_times, 1);
  EXPECT_EQ(r.statistics.at("nodes_removed"), 0);
  EXPECT_EQ(inputName(t.graph, "r2"), "x");
  EXPECT_EQ(inputName(t.graph, "e"), "r1");
  EXPECT_TRUE(sameResults(before, t.graph, t.feed));
}

TEST(ReshapeTransposeFolding, ReshapeBackToTheInputShapeVanishes) {
  Built t = withInput();
  ops::OpBuilder b(t.graph);
  ValueId r1 = b.create("Reshape", "r1", {t.x}, {{"shape", Ints{6, 4}}});
  ValueId r2 = b.create("Reshape", "r2", {r1}, {{"shape", Ints{2, 3, 4}}});
  t.graph.addOutput("y", b.create("Exp", "e", {r2}));
  // A graph output that is an identity Reshape of an input reads the input.
  t.graph.addOutput("same", b.create("Reshape", "same", {t.x}, {{"shape", Ints{2, -1, 4}}}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  const Graph before = t.graph;

  passes::PassResult r = runOnePass(t.graph, kPass);
  EXPECT_EQ(r.match_times, 2);
  EXPECT_EQ(r.effect_times, 3); // r1, r2, same
  EXPECT_EQ(r.statistics.at("identities_removed"), 2);
  EXPECT_EQ(t.graph.numNodes(), 1u);
  EXPECT_EQ(inputName(t.graph, "e"), "x");
  EXPECT_EQ(t.graph.valueName(t.graph.findOutput("same")->value), "x");
  EXPECT_TRUE(sameResults(before, t.graph, t.feed));
}

TEST(ReshapeTransposeFolding, TransposeOfTransposeComposesThePerms) {
  Built t = withInput();
  ops::OpBuilder b(t.graph);
  // [2,3,4] -perm [1,2,0]-> [3,4,2] -perm [1,0,2]-> [4,3,2] = x with perm [2,1,0].
  ValueId t1 = b.create("Transpose", "t1", {t.x}, {{"perm", Ints{1, 2, 0}}});
  t.graph.addOutput("y", b.create("Transpose", "t2", {t1}, {{"perm", Ints{1, 0, 2}}}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  const Graph before = t.graph;

  passes::PassResult r = runOnePass(t.graph, kPass);
  EXPECT_EQ(r.match_times, 1);
  EXPECT_EQ(r.effect_times, 2);
  EXPECT_EQ(r.statistics.at("transposes_composed"), 1);
  EXPECT_EQ(nodeNamed(t.graph, "t2").attrs.getInts("perm"), (Ints{2, 1, 0}));
  EXPECT_EQ(inputName(t.graph, "t2"), "x");
  EXPECT_EQ(provenanceOf(t.graph, "t2"), "ReshapeTransposeFoldingPass <- t2, t1");
  EXPECT_TRUE(sameResults(before, t.graph, t.feed));
}

TEST(ReshapeTransposeFolding, TransposesThatCancelAndIdentityTransposesVanish) {
  Built t = withInput();
  ops::OpBuilder b(t.graph);
  // perm [1,2,0] then [2,0,1]: each axis comes back home.
  ValueId t1 = b.create("Transpose", "t1", {t.x}, {{"perm", Ints{1, 2, 0}}});
  ValueId t2 = b.create("Transpose", "t2", {t1}, {{"perm", Ints{2, 0, 1}}});
  ValueId id = b.create("Transpose", "id", {b.create("Neg", "n", {t2})}, {{"perm", Ints{0, 1, 2}}});
  t.graph.addOutput("y", b.create("Exp", "e", {id}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  const Graph before = t.graph;

  passes::PassResult r = runOnePass(t.graph, kPass);
  EXPECT_EQ(r.match_times, 2);
  EXPECT_EQ(r.effect_times, 3);
  EXPECT_EQ(r.statistics.at("identities_removed"), 2);
  EXPECT_EQ(inputName(t.graph, "n"), "x");
  EXPECT_EQ(inputName(t.graph, "e"), "n");
  EXPECT_TRUE(sameResults(before, t.graph, t.feed));
}

TEST(ReshapeTransposeFolding, MixedAndNonIdentityNodesStay) {
  Built t = withInput();
  ops::OpBuilder b(t.graph);
  ValueId tr = b.create("Transpose", "tr", {t.x}, {{"perm", Ints{0, 2, 1}}});
  ValueId rs = b.create("Reshape", "rs", {tr}, {{"shape", Ints{2, 12}}});
  ValueId back = b.create("Transpose", "back", {rs}, {{"perm", Ints{1, 0}}});
  // A square transpose keeps the shape but is no identity.
  ValueId sq = b.create("Reshape", "sq", {back}, {{"shape", Ints{4, 6}}});
  ValueId flip = b.create(
      "Transpose", "flip",
      {b.create("Reshape", "sq2", {b.create("Exp", "e", {sq})}, {{"shape", Ints{2, 2, 6}}})},
      {{"perm", Ints{1, 0, 2}}});
  t.graph.addOutput("y", flip);
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  const std::string text = textOf(t.graph);
  passes::PassResult r = runOnePass(t.graph, kPass);
  EXPECT_EQ(r.match_times, 0);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_EQ(textOf(t.graph), text);
}

TEST(ReshapeTransposeFolding, LeavesFusionGroupsAlone) {
  Built t = withInput();
  ops::OpBuilder b(t.graph);
  ValueId r1 = b.create("Reshape", "r1", {t.x}, {{"shape", Ints{6, 4}}});
  t.graph.addOutput("y", b.create("Reshape", "r2", {r1}, {{"shape", Ints{24}}}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  GroupId grp = t.graph.addGroup(FusionGroup{"fused.r1", "eltwise", "test", Intermediates::F32});
  t.graph.node(t.graph.findNode("r1")).group = grp;
  passes::PassResult r = runOnePass(t.graph, kPass);
  EXPECT_EQ(r.match_times, 1);
  EXPECT_EQ(r.effect_times, 0);
  ASSERT_EQ(r.rejections.size(), 1u);
  EXPECT_EQ(r.rejections[0].node, "r2");
  EXPECT_NE(r.rejections[0].reason.find("'r1' belongs to fusion group 'fused.r1'"),
            std::string::npos);
}

TEST(ReshapeTransposeFolding, SwitchedOffLeavesTheGraphUnchanged) {
  Built t = withInput();
  ops::OpBuilder b(t.graph);
  ValueId r1 = b.create("Reshape", "r1", {t.x}, {{"shape", Ints{6, 4}}});
  t.graph.addOutput("y", b.create("Reshape", "r2", {r1}, {{"shape", Ints{24}}}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  expectSwitchDecides(t.graph, kPass);
}

} // namespace
} // namespace kiln::testing
