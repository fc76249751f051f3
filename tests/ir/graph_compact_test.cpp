// Graph rewriting: erase, replace uses, compaction with fusion groups.
#include <gtest/gtest.h>

#include "formats/graph_json.h"
#include "ir/graph.h"
#include "ir/verifier.h"

namespace kiln {
namespace {

TensorType f32(Shape s) { return TensorType{DType::F32, std::move(s)}; }

TEST(GraphCompact, DropsErasedNodesAndRenumbers) {
  Graph g("t");
  ValueId x = g.addInput("x", f32({4}), InputRole::Data);
  NodeId a = g.addNode("Neg", "a", {x}, {f32({4})});
  NodeId b = g.addNode("Neg", "b", {g.node(a).outputs[0]}, {f32({4})});
  g.addOutput("y", g.node(b).outputs[0]);
  g.replaceAllUses(g.node(b).outputs[0], g.node(a).outputs[0]);
  g.eraseNode(b);
  ASSERT_TRUE(g.compact().isOk());
  ASSERT_EQ(g.numNodes(), 1u);
  EXPECT_EQ(g.node(0).name, "a");
  EXPECT_EQ(g.numValues(), 2u);
  EXPECT_EQ(g.valueName(g.outputs()[0].value), "a");
  EXPECT_TRUE(verifyStructure(g).isOk());
}

TEST(GraphCompact, SortsAppendedNodesBeforeTheirUsers) {
  Graph g("t");
  ValueId x = g.addInput("x", f32({4}), InputRole::Data);
  NodeId a = g.addNode("Neg", "a", {x}, {f32({4})});
  NodeId c = g.addNode("Exp", "c", {g.node(a).outputs[0]}, {f32({4})});
  g.addOutput("y", g.node(c).outputs[0]);
  // Insert b between a and c by appending it and rewiring c.
  NodeId b = g.addNode("Neg", "b", {g.node(a).outputs[0]}, {f32({4})});
  g.setInput(c, 0, g.node(b).outputs[0]);
  EXPECT_FALSE(verifyStructure(g).isOk());
  ASSERT_TRUE(g.compact().isOk());
  EXPECT_EQ(g.node(0).name, "a");
  EXPECT_EQ(g.node(1).name, "b");
  EXPECT_EQ(g.node(2).name, "c");
  EXPECT_TRUE(verifyStructure(g).isOk());
}

TEST(GraphCompact, MakesGroupsContiguousAndRejectsNonConvexOnes) {
  Graph g("t");
  ValueId x = g.addInput("x", f32({4}), InputRole::Data);
  NodeId a = g.addNode("Neg", "a", {x}, {f32({4})});
  NodeId other = g.addNode("Exp", "other", {x}, {f32({4})});
  NodeId b = g.addNode("Neg", "b", {g.node(a).outputs[0]}, {f32({4})});
  g.addOutput("y", g.node(b).outputs[0]);
  g.addOutput("z", g.node(other).outputs[0]);
  GroupId grp = g.addGroup(FusionGroup{"fused.a", "eltwise", "test", Intermediates::F32});
  g.node(a).group = grp;
  g.node(b).group = grp;
  EXPECT_FALSE(verifyStructure(g).isOk()) << "members are not contiguous yet";
  ASSERT_TRUE(g.compact().isOk());
  EXPECT_TRUE(verifyStructure(g).isOk());
  EXPECT_EQ(g.node(0).name, "a");
  EXPECT_EQ(g.node(1).name, "b");
  // JSON keeps the group.
  auto back = graphFromJson(graphToJson(g), "mem");
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(back->groups(), g.groups());
  EXPECT_EQ(back->node(1).group, 0);

  // a -> m (outside) -> b with a and b grouped: not convex.
  Graph h("t");
  ValueId y = h.addInput("x", f32({4}), InputRole::Data);
  NodeId p = h.addNode("Neg", "p", {y}, {f32({4})});
  NodeId m = h.addNode("Exp", "m", {h.node(p).outputs[0]}, {f32({4})});
  NodeId q = h.addNode("Neg", "q", {h.node(m).outputs[0]}, {f32({4})});
  h.addOutput("o", h.node(q).outputs[0]);
  GroupId hg = h.addGroup(FusionGroup{"fused.p", "eltwise", "test", Intermediates::F32});
  h.node(p).group = hg;
  h.node(q).group = hg;
  Status s = h.compact();
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("not convex"), std::string::npos) << s.message();
  EXPECT_EQ(h.node(1).name, "m") << "a failed compaction leaves the graph unchanged";
}

TEST(GraphCompact, ErasedProducerStillUsedIsAnError) {
  Graph g("t");
  ValueId x = g.addInput("x", f32({4}), InputRole::Data);
  NodeId a = g.addNode("Neg", "a", {x}, {f32({4})});
  g.addOutput("y", g.node(a).outputs[0]);
  g.eraseNode(a);
  Status s = g.compact();
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("'y'"), std::string::npos) << s.message();
}

} // namespace
} // namespace kiln
