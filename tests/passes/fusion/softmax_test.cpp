// SoftmaxFusionPass: scale -> CausalMask -> Softmax as one F32 kernel with
// whatever of the prologue is free, SoftmaxGrad with its neighbours on the
// same rows, every refusal, the tiny Qwen step and Qwen-14B.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/autodiff/autodiff.h"
#include "compiler/autodiff/training_step.h"
#include "compiler/frontend/model_loader.h"
#include "ops/op_builder.h"
#include "ops/op_verifier.h"
#include "passes/pass_registry.h"
#include "tests/support/op_test_util.h"
#include "tests/support/pass_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

const char *kPass = "SoftmaxFusionPass";

passes::PassResult runPass(Graph &g) { return runOnePass(g, kPass); }
using Names = std::vector<std::string>;

void groupAs(Graph &g, const std::string &node, const std::string &group) {
  GroupId id = g.addGroup(FusionGroup{group, "other", "OtherPass", Intermediates::Storage});
  g.node(g.findNode(node)).group = id;
}

// Attention scores s [1,2,8,8] scaled (Div by a splat unless `scale_op` says
// otherwise), causally masked and softmaxed; loss sum(p * r) and, when asked,
// the gradient in s through autodiff.
struct ScoresCase {
  Graph g{"attn"};
  ops::TensorMap feed;

  ScoresCase(DType dtype, const std::string &scale_op = "Div", bool mask = true, int64_t axis = 3,
             bool backward = false, bool scale_by_tensor = false) {
    TensorType t{dtype, {1, 2, 8, 8}};
    ValueId s = input("s", t);
    ValueId r = input("r", {DType::F32, t.shape});
    ops::OpBuilder b(g);
    ValueId x = s;
    if (!scale_op.empty()) {
      ValueId k = scale_by_tensor ? input("k", t) : b.constant(4.0, dtype, "scale_factor");
      x = b.create(scale_op, "scale", {x, k});
    }
    if (mask)
      x = b.create("CausalMask", "causal_mask", {x}, {{"fill", -60000.0}});
    ValueId p = b.create("Softmax", "softmax", {x}, {{"axis", axis}});
    ValueId pf = dtype == DType::F32 ? p : b.create("Cast", "p_f32", {p}, {{"dtype", DType::F32}});
    ValueId loss = b.create("ReduceSum", "loss", {b.create("Mul", "weighted", {pf, r})});
    EXPECT_TRUE(b.status().isOk()) << b.status().message();
    g.addOutput("p", p);
    if (backward) {
      auto grads = autodiff::gradients(b, loss, {s});
      EXPECT_TRUE(grads) << grads.message();
      g.addOutput("ds", (*grads)[0]);
    }
  }
  ValueId input(const std::string &name, TensorType type) {
    feed[name] = randomTensor(type, 29 + feed.size(), -3.0f, 3.0f);
    return g.addInput(name, std::move(type), InputRole::Data);
  }
  std::string nameOf(const std::string &op) const {
    for (const Node &n : g.nodes())
      if (n.op == op)
        return n.name;
    return "<no " + op + ">";
  }
};

TEST(SoftmaxFusion, FusesScaleMaskAndSoftmaxIntoOneF32Kernel) {
  for (const char *op : {"Div", "Mul"}) {
    ScoresCase c(DType::F16, op);
    Graph unfused = c.g;
    passes::PassResult r = runPass(c.g);
    EXPECT_EQ(r.match_times, 1);
    EXPECT_EQ(r.effect_times, 1);
    EXPECT_TRUE(r.rejections.empty());
    ASSERT_EQ(c.g.groups().size(), 1u);
    const FusionGroup &grp = c.g.groups()[0];
    EXPECT_EQ(grp.name, "fused.softmax");
    EXPECT_EQ(grp.kernel, "softmax");
    EXPECT_EQ(grp.formed_by, kPass);
    EXPECT_EQ(grp.intermediates, Intermediates::F32);
    EXPECT_EQ(groupMemberNames(c.g, "softmax"),
              (Names{"scale_factor", "scale", "causal_mask", "softmax"}))
        << op;
    EXPECT_TRUE(fusedMatchesUnfused(c.g, unfused, c.feed, DType::F16)) << op;
  }
}

TEST(SoftmaxFusion, TakesWhatIsLeftOfThePrologue) {
  ScoresCase c(DType::F16);
  groupAs(c.g, "scale", "fused.scores");
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.effect_times, 1);
  EXPECT_EQ(groupMemberNames(c.g, "softmax"), (Names{"causal_mask", "softmax"}));
  EXPECT_EQ(groupMemberNames(c.g, "scale"), (Names{"scale"}));
  EXPECT_TRUE(groupMemberNames(c.g, "scale_factor").empty())
      << "the splat is read by the other kernel";

  ScoresCase unscaled(DType::F32, "");
  r = runPass(unscaled.g);
  EXPECT_EQ(groupMemberNames(unscaled.g, "softmax"), (Names{"causal_mask", "softmax"}));
  ScoresCase unmasked(DType::F32, "Div", false);
  r = runPass(unmasked.g);
  EXPECT_EQ(groupMemberNames(unmasked.g, "softmax"), (Names{"scale_factor", "scale", "softmax"}));
}

TEST(SoftmaxFusion, ReportsAPrologueNodeOfAnotherGroup) {
  ScoresCase c(DType::F16);
  groupAs(c.g, "causal_mask", "fused.scores");
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.effect_times, 0) << "the scale cannot join past the grouped mask";
  EXPECT_TRUE(mentions(reasonFor(r, "causal_mask"),
                       {"left out of the softmax kernel of 'softmax'",
                        "'causal_mask' is already in fused group 'fused.scores' (formed by "
                        "OtherPass)"}));
  EXPECT_TRUE(mentions(reasonFor(r, "softmax"),
                       {"Softmax 'softmax' has nothing to fuse with", "'causal_mask' is already"}));
}

TEST(SoftmaxFusion, RefusesASoftmaxWithNothingBeforeIt) {
  ScoresCase c(DType::F32, "", false);
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.match_times, 1);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_TRUE(mentions(reasonFor(r, "softmax"),
                       {"Softmax 'softmax' has nothing to fuse with: no scale or CausalMask"}));
}

TEST(SoftmaxFusion, RefusesASoftmaxOverAnotherAxis) {
  ScoresCase c(DType::F32, "Div", true, 2);
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_TRUE(
      mentions(reasonFor(r, "softmax"),
               {"Softmax 'softmax' normalises axis 2 of a rank-4 input", "rows of the last axis"}));
}

TEST(SoftmaxFusion, LeavesOutADivisionByATensor) {
  ScoresCase c(DType::F32, "Div", true, 3, false, true);
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.effect_times, 1);
  EXPECT_EQ(groupMemberNames(c.g, "softmax"), (Names{"causal_mask", "softmax"}));
  EXPECT_TRUE(mentions(reasonFor(r, "scale"), {"left out of the softmax kernel of 'softmax'",
                                               "Div 'scale' is not a scale by a splat"}));
}

TEST(SoftmaxFusion, LeavesNodesOfOtherGroupsAlone) {
  ScoresCase c(DType::F32);
  groupAs(c.g, "softmax", "fused.other");
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_TRUE(mentions(reasonFor(r, "softmax"), {"'softmax' is already in fused group "
                                                 "'fused.other' (formed by OtherPass)"}));
}

class SoftmaxGradPerDtype : public ::testing::TestWithParam<DType> {};

TEST_P(SoftmaxGradPerDtype, FusesSoftmaxGradWithTheScoresGradient) {
  ScoresCase c(GetParam(), "Div", true, 3, true);
  Graph unfused = c.g;
  const std::string sg = c.nameOf("SoftmaxGrad");
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.match_times, 2);
  EXPECT_EQ(r.effect_times, 2);
  EXPECT_EQ(r.statistics["backward_groups"], 1);
  NodeId id = c.g.findNode(sg);
  ASSERT_NE(c.g.node(id).group, kNoGroup);
  const FusionGroup &grp = c.g.group(c.g.node(id).group);
  EXPECT_EQ(grp.name, "fused." + sg);
  EXPECT_EQ(grp.kernel, "softmax_grad");
  EXPECT_EQ(grp.intermediates, Intermediates::F32);
  // The masked gradient and the gradient through the scale run on its rows.
  Names members = groupMemberNames(c.g, sg);
  NodeId ds = c.g.value(c.g.findOutput("ds")->value).producer;
  EXPECT_EQ(c.g.node(ds).op, "Div");
  std::vector<std::string> ops;
  for (const std::string &m : members)
    ops.push_back(c.g.node(c.g.findNode(m)).op);
  EXPECT_NE(std::find(ops.begin(), ops.end(), "CausalMask"), ops.end());
  EXPECT_NE(std::find(members.begin(), members.end(), c.g.node(ds).name), members.end());
  for (const std::string &op : ops)
    EXPECT_NE(op, "SumToShape") << "a whole-tensor sum is not on the rows";
  EXPECT_TRUE(fusedMatchesUnfused(c.g, unfused, c.feed, GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, SoftmaxGradPerDtype,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const auto &info) { return std::string(dtypeName(info.param)); });

TEST(SoftmaxFusion, KeepsTheBackwardGroupConvex) {
  // sg -> e = Exp(sg); t = Transpose(Transpose(sg)); a = Add(e, t): a would
  // make the path sg -> Transpose -> Transpose -> a leave and come back.
  Graph g("t");
  TensorType t{DType::F32, {2, 8, 8}};
  ValueId y = g.addInput("y", t, InputRole::Data);
  ValueId dy = g.addInput("dy", t, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId sg = b.create("SoftmaxGrad", "sg", {y, dy});
  ValueId e = b.create("Exp", "e", {sg});
  std::vector<int64_t> perm{0, 2, 1};
  ValueId tt = b.create("Transpose", "t2", {b.create("Transpose", "t1", {sg}, {{"perm", perm}})},
                        {{"perm", perm}});
  ValueId a = b.create("Add", "a", {e, tt});
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  g.addOutput("a", a);
  passes::PassResult r = runPass(g);
  EXPECT_EQ(groupMemberNames(g, "sg"), (Names{"sg", "e"}));
  EXPECT_TRUE(
      mentions(reasonFor(r, "a"), {"left out of the softmax_grad kernel of 'sg'",
                                   "a path leaves the group through 't2'", "comes back into 'a'"}));
}

TEST(SoftmaxFusion, RefusesASoftmaxGradWithNoVectorOpOnItsRows) {
  Graph g("t");
  TensorType t{DType::F32, {2, 8, 8}};
  ValueId y = g.addInput("y", t, InputRole::Data);
  ValueId dy = g.addInput("dy", t, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId sg = b.create("SoftmaxGrad", "sg", {y, dy});
  // Same element count, other rows: not the kernel's rows.
  ValueId n = b.create("Neg", "n", {b.create("Reshape", "flat", {sg}, {{"shape", Shape{2, 64}}})});
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  g.addOutput("n", n);
  passes::PassResult r = runPass(g);
  EXPECT_EQ(r.match_times, 1);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_TRUE(mentions(reasonFor(r, "sg"),
                       {"SoftmaxGrad 'sg' has nothing to fuse with: no vector op on its rows"}));
}

TEST(SoftmaxFusion, SwitchedOffItFusesNothing) { expectSwitchedOffFusesNothing(kPass); }

class SoftmaxOnTinyQwen : public ::testing::TestWithParam<DType> {};

TEST_P(SoftmaxOnTinyQwen, FusesEveryAttentionAndAgreesWithUnfused) {
  TinyTrainingStep step = tinyTrainingStep(GetParam());
  Graph unfused = step.graph;
  runPasses(unfused, noFusion("ascend910b"));
  passes::PipelineReport report = runPasses(step.graph, onlyFusionPass("ascend910b", kPass));
  const passes::PassRecord *rec = report.find(kPass);
  ASSERT_NE(rec, nullptr);
  const int64_t layers = tinyQwenLayers();
  auto stats = rec->result.statistics;
  EXPECT_EQ(stats["forward_groups"], layers);
  EXPECT_EQ(stats["backward_groups"], layers);
  EXPECT_TRUE(fusedMatchesUnfused(step.graph, unfused, step.feed, GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, SoftmaxOnTinyQwen,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const auto &info) { return std::string(dtypeName(info.param)); });

TEST(SoftmaxFusion, FusesEveryAttentionOfQwen14B) {
  Qwen14bTrainingStep big = qwen14bTrainingStep(DType::F16);
  ASSERT_GT(big.graph.numNodes(), 0u);
  Graph *train = &big.graph;
  passes::PipelineReport report = runPasses(*train, onlyFusionPass("ascend910b", kPass));
  const passes::PassRecord *rec = report.find(kPass);
  ASSERT_NE(rec, nullptr);
  auto stats = rec->result.statistics;
  EXPECT_EQ(stats["forward_groups"], big.layers);
  EXPECT_EQ(stats["backward_groups"], big.layers);
}

} // namespace
} // namespace kiln::testing
