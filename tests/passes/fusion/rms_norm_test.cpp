// RmsNormFusionPass: the RMSNorm forward and the gradient autodiff makes for
// it as one F32 kernel each; every condition that refuses a candidate; the
// tiny Qwen step fused vs unfused; every norm of Qwen-14B.
#include <cmath>
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

const char *kPass = "RmsNormFusionPass";

passes::PassResult runPass(Graph &g) { return runOnePass(g, kPass); }
using Names = std::vector<std::string>;

const FusionGroup *groupOf(const Graph &g, const std::string &node) {
  NodeId id = g.findNode(node);
  return id == kNoNode || g.node(id).group == kNoGroup ? nullptr : &g.group(g.node(id).group);
}

// How a test bends the norm away from RMSNorm.
struct Variant {
  std::vector<int64_t> axes{2};
  bool keepdims = true;
  bool square_of_two = false;      // Mul(x, r) instead of Mul(x, x)
  Shape weight{16};                // the weight's shape
  bool weight_from_square = false; // w computed from the square: a path out and back
  bool backward = true;
};

// x [2,4,16] in `dtype` normalised as the Qwen frontend does it (f32 inside,
// Casts around it unless dtype is f32), times w; the loss sum(y * r) and,
// when asked, its gradients in x and w through autodiff.
struct NormCase {
  Graph g{"norm"};
  ops::TensorMap feed;

  explicit NormCase(DType dtype, const Variant &v = {}) {
    ValueId x = input("x", {dtype, {2, 4, 16}});
    ValueId r = input("r", {DType::F32, {2, 4, 16}});
    ops::OpBuilder b(g);
    ValueId w;
    ValueId y;
    {
      auto scope = b.scope("ln");
      ValueId xf =
          dtype == DType::F32 ? x : b.create("Cast", "to_f32", {x}, {{"dtype", DType::F32}});
      ValueId sq = b.create("Mul", "square", {xf, v.square_of_two ? r : xf});
      if (v.weight_from_square) {
        w = b.create("SumToShape", "w_sum", {sq}, {{"shape", v.weight}});
        if (dtype != DType::F32)
          w = b.create("Cast", "w_cast", {w}, {{"dtype", dtype}});
      } else {
        w = input("w", {dtype, v.weight});
      }
      ValueId ms =
          b.create("ReduceMean", "mean", {sq}, {{"axes", v.axes}, {"keepdims", v.keepdims}});
      ValueId inv =
          b.create("Rsqrt", "rsqrt",
                   {b.create("Add", "add_eps", {ms, b.constant(1e-6, DType::F32, "eps")})});
      y = b.create("Mul", "normalize", {xf, inv});
      if (dtype != DType::F32)
        y = b.create("Cast", "to_dtype", {y}, {{"dtype", dtype}});
      y = b.create("Mul", "mul_weight", {y, w});
    }
    ValueId yf = dtype == DType::F32 ? y : b.create("Cast", "y_f32", {y}, {{"dtype", DType::F32}});
    ValueId loss = b.create("ReduceSum", "loss", {b.create("Mul", "weighted", {yf, r})});
    EXPECT_TRUE(b.status().isOk()) << b.status().message();
    g.addOutput("y", y);
    if (v.backward) {
      auto grads = autodiff::gradients(b, loss, {x, w});
      EXPECT_TRUE(grads) << grads.message();
      g.addOutput("dx", (*grads)[0]);
      g.addOutput("dw", (*grads)[1]);
    }
    EXPECT_TRUE(ops::verifyGraph(g).isOk());
  }
  ValueId input(const std::string &name, TensorType type) {
    feed[name] = randomTensor(type, 17 + feed.size(), -2.0f, 2.0f);
    return g.addInput(name, std::move(type), InputRole::Data);
  }
  NodeId only(const std::string &op) const {
    NodeId found = kNoNode;
    for (NodeId i = 0; i < static_cast<NodeId>(g.numNodes()); ++i)
      if (g.node(i).op == op) {
        EXPECT_EQ(found, kNoNode) << "one " << op << " expected";
        found = i;
      }
    return found;
  }
};

class RmsNormPerDtype : public ::testing::TestWithParam<DType> {};

TEST_P(RmsNormPerDtype, ForwardAndBackwardBecomeOneF32KernelEach) {
  NormCase c(GetParam());
  Graph unfused = c.g;
  const std::string rsqrt_grad = c.g.node(c.only("RsqrtGrad")).name;
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.match_times, 2);
  EXPECT_EQ(r.effect_times, 2);
  EXPECT_TRUE(r.rejections.empty()) << r.rejections[0].reason;
  EXPECT_EQ(r.statistics["forward_groups"], 1);
  EXPECT_EQ(r.statistics["backward_groups"], 1);

  const FusionGroup *fwd = groupOf(c.g, "ln.mean");
  ASSERT_NE(fwd, nullptr);
  EXPECT_EQ(fwd->name, "fused.ln.mean");
  EXPECT_EQ(fwd->kernel, "rms_norm");
  EXPECT_EQ(fwd->intermediates, Intermediates::F32);
  Names forward{"ln.square", "ln.eps", "ln.add_eps", "ln.rsqrt", "ln.normalize", "ln.mul_weight"};
  if (GetParam() != DType::F32)
    for (const char *n : {"ln.to_f32", "ln.to_dtype"})
      forward.push_back(n);
  for (const std::string &n : forward)
    EXPECT_EQ(groupOf(c.g, n), fwd) << n;

  const FusionGroup *bwd = groupOf(c.g, rsqrt_grad);
  ASSERT_NE(bwd, nullptr);
  EXPECT_EQ(bwd->name, "fused." + rsqrt_grad);
  EXPECT_EQ(bwd->kernel, "rms_norm_grad");
  EXPECT_EQ(bwd->intermediates, Intermediates::F32);
  // The two row sums and the weight's gradient are inside; x's gradient leaves it.
  int sums = 0;
  for (NodeId i = 0; i < static_cast<NodeId>(c.g.numNodes()); ++i)
    if (c.g.node(i).op == "SumToShape" && groupOf(c.g, c.g.node(i).name) == bwd)
      ++sums;
  EXPECT_EQ(sums, 2);
  NodeId dx = c.g.value(c.g.findOutput("dx")->value).producer;
  EXPECT_EQ(groupOf(c.g, c.g.node(dx).name), bwd);
  NodeId dw = c.g.value(c.g.findOutput("dw")->value).producer;
  EXPECT_EQ(groupOf(c.g, c.g.node(dw).name), bwd);

  if (GetParam() == DType::F32) {
    EXPECT_TRUE(fusedMatchesUnfused(c.g, unfused, c.feed, GetParam()));
    return;
  }
  // In 16 bits the weight's gradient sums products that cancel, so rounding
  // each product (unfused) differs visibly from not rounding it (fused):
  // measure both against the same norm computed in f32 from the same data.
  NormCase ref(DType::F32);
  ops::TensorMap feed32;
  for (const auto &[name, t] : c.feed)
    feed32[name] = t.castTo(DType::F32);
  auto exact = ops::interpret(ref.g, feed32);
  auto fused = ops::interpret(c.g, c.feed);
  auto plain = ops::interpret(unfused, c.feed);
  ASSERT_TRUE(exact && fused && plain);
  for (const auto &[name, e] : *exact) {
    double ef = 0, ep = 0;
    for (int64_t i = 0; i < e.numElements(); ++i) {
      ef += std::abs(fused->at(name).getFloat(i) - e.getFloat(i));
      ep += std::abs(plain->at(name).getFloat(i) - e.getFloat(i));
    }
    EXPECT_LE(ef, ep) << name << ": fusing in f32 must not lose accuracy";
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RmsNormPerDtype,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const auto &info) { return std::string(dtypeName(info.param)); });

TEST(RmsNormFusion, RefusesAReductionOverAnotherAxis) {
  Variant v;
  v.axes = {1};
  v.backward = false;
  NormCase c(DType::F16, v);
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.match_times, 1);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_TRUE(
      mentions(reasonFor(r, "ln.mean"), {"ReduceMean 'ln.mean' reduces axes [1] of a rank-3 input",
                                         "reduces the last axis only"}));
  EXPECT_TRUE(c.g.groups().empty());
}

TEST(RmsNormFusion, RefusesAMeanWithoutKeepdims) {
  // Only the ReduceMean matters: without keepdims nothing after it type-checks.
  Graph g("t");
  ValueId x = g.addInput("x", TensorType{DType::F32, {2, 4, 16}}, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId m = b.create("ReduceMean", "mean", {b.create("Mul", "square", {x, x})},
                       {{"axes", std::vector<int64_t>{-1}}, {"keepdims", false}});
  g.addOutput("m", m);
  passes::PassResult r = runPass(g);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_TRUE(mentions(reasonFor(r, "mean"), {"ReduceMean 'mean' has keepdims=false"}));
}

TEST(RmsNormFusion, RefusesAMeanThatIsNotOfASquare) {
  Variant v;
  v.square_of_two = true;
  v.backward = false;
  NormCase c(DType::F32, v);
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_TRUE(mentions(reasonFor(r, "ln.mean"), {"does not average a square Mul(x, x)"}));
}

TEST(RmsNormFusion, RefusesAWeightThatDoesNotMatchTheRows) {
  Variant v;
  v.weight = {1};
  v.backward = false;
  NormCase c(DType::F16, v);
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_TRUE(mentions(reasonFor(r, "ln.mean"), {"row shapes disagree", "Mul 'ln.mul_weight'",
                                                 "by [1]", "not by a weight of shape [16]"}));
}

TEST(RmsNormFusion, RefusesANonConvexNorm) {
  Variant v;
  v.weight_from_square = true; // square -> w_sum (outside) -> mul_weight
  v.backward = false;
  NormCase c(DType::F32, v);
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.match_times, 1);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_TRUE(mentions(reasonFor(r, "ln.mean"), {"a path leaves the group through 'ln.w_sum'",
                                                 "comes back into 'ln.mul_weight'"}));
}

TEST(RmsNormFusion, LeavesNodesOfOtherGroupsAlone) {
  NormCase c(DType::F16, Variant{.backward = false});
  GroupId other = c.g.addGroup(FusionGroup{"fused.x", "other", "OtherPass", Intermediates::F32});
  c.g.node(c.g.findNode("ln.rsqrt")).group = other;
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_TRUE(mentions(reasonFor(r, "ln.mean"),
                       {"'ln.rsqrt' is already in fused group 'fused.x' (formed by OtherPass)"}));
}

TEST(RmsNormFusion, AGroupedInputCastIsLeftOutAndReported) {
  NormCase c(DType::F16, Variant{.backward = false});
  GroupId other = c.g.addGroup(FusionGroup{"fused.x", "other", "OtherPass", Intermediates::F32});
  c.g.node(c.g.findNode("ln.to_f32")).group = other;
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.effect_times, 1);
  EXPECT_EQ(groupOf(c.g, "ln.to_f32")->name, "fused.x");
  EXPECT_EQ(groupOf(c.g, "ln.square")->kernel, "rms_norm");
  EXPECT_TRUE(mentions(reasonFor(r, "ln.to_f32"),
                       {"left out of the rms_norm kernel", "already in fused group 'fused.x'"}));
}

TEST(RmsNormFusion, RefusesAGradientWhoseRowSumDropsTheAxis) {
  NormCase c(DType::F16);
  // Replace the row sum feeding RsqrtGrad by ReduceSum(keepdims=false) + Reshape.
  NodeId rg = c.only("RsqrtGrad");
  NodeId old_sum = c.g.value(c.g.node(rg).inputs[1]).producer;
  ValueId p = c.g.node(old_sum).inputs[0];
  ops::OpBuilder b(c.g);
  ValueId s = b.create("ReduceSum", "alt.sum", {p},
                       {{"axes", std::vector<int64_t>{2}}, {"keepdims", false}});
  ValueId rs = b.create("Reshape", "alt.reshape", {s}, {{"shape", std::vector<int64_t>{2, 4, 1}}});
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  c.g.setInput(rg, 1, rs);
  c.g.eraseNode(old_sum);
  ASSERT_TRUE(c.g.compact().isOk());
  const std::string name = c.g.node(c.only("RsqrtGrad")).name;

  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.effect_times, 1) << "the forward still fuses";
  EXPECT_EQ(groupOf(c.g, name), nullptr);
  EXPECT_TRUE(
      mentions(reasonFor(r, name), {"RsqrtGrad '" + name + "'",
                                    "its dy is not a row sum over the last axis with keepdims",
                                    "comes from Reshape 'alt.reshape'"}));
}

TEST(RmsNormFusion, RefusesAGradientPathThroughAnotherKindOfOp) {
  NormCase c(DType::F32);
  // Route Mul(dy, rsqrt)'s result through an identity Reshape before the sum.
  NodeId rsqrt = c.g.findNode("ln.rsqrt");
  ValueId inv = c.g.node(rsqrt).outputs[0];
  NodeId ndx = kNoNode;
  for (NodeId i = 0; i < static_cast<NodeId>(c.g.numNodes()); ++i)
    if (c.g.node(i).op == "Mul" && c.g.node(i).name != "ln.normalize" &&
        (c.g.node(i).inputs[0] == inv || c.g.node(i).inputs[1] == inv))
      ndx = i;
  ASSERT_NE(ndx, kNoNode);
  ValueId out = c.g.node(ndx).outputs[0];
  std::vector<std::vector<NodeId>> users = c.g.computeUsers();
  ASSERT_EQ(users[out].size(), 1u);
  NodeId merge = users[out][0];
  ops::OpBuilder b(c.g);
  ValueId detour =
      b.create("Reshape", "alt.detour", {out}, {{"shape", std::vector<int64_t>{2, 4, 16}}});
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  for (size_t k = 0; k < c.g.node(merge).inputs.size(); ++k)
    if (c.g.node(merge).inputs[k] == out)
      c.g.setInput(merge, k, detour);
  ASSERT_TRUE(c.g.compact().isOk());
  const std::string name = c.g.node(c.only("RsqrtGrad")).name;

  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(groupOf(c.g, name), nullptr);
  EXPECT_TRUE(mentions(reasonFor(r, name), {"the gradient path runs through Reshape 'alt.detour'",
                                            "which an rms_norm_grad kernel does not hold"}));
}

TEST(RmsNormFusion, RefusesTheGradientOfAPlainRsqrt) {
  Graph g("t");
  ValueId x = g.addInput("x", TensorType{DType::F32, {2, 4}}, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId loss = b.create("ReduceSum", "loss", {b.create("Rsqrt", "rsqrt", {x})});
  auto grads = autodiff::gradients(b, loss, {x});
  ASSERT_TRUE(grads) << grads.message();
  g.addOutput("dx", (*grads)[0]);
  NodeId rg = g.value((*grads)[0]).producer;
  ASSERT_EQ(g.node(rg).op, "RsqrtGrad");
  const std::string name = g.node(rg).name;
  passes::PassResult r = runPass(g);
  EXPECT_EQ(r.match_times, 1);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_TRUE(mentions(reasonFor(r, name),
                       {"its y is not the Rsqrt of an RMSNorm's mean of squares plus epsilon"}));
}

TEST(RmsNormFusion, SwitchedOffItFusesNothing) { expectSwitchedOffFusesNothing(kPass); }

class RmsNormOnTinyQwen : public ::testing::TestWithParam<DType> {};

// Two norms per layer and ln_f; each has a backward kernel too.
TEST_P(RmsNormOnTinyQwen, FusesEveryNormAndAgreesWithUnfused) {
  TinyTrainingStep step = tinyTrainingStep(GetParam());
  Graph unfused = step.graph;
  runPasses(unfused, noFusion("ascend910b"));
  passes::PipelineReport report = runPasses(step.graph, onlyFusionPass("ascend910b", kPass));
  const passes::PassRecord *rec = report.find(kPass);
  ASSERT_NE(rec, nullptr);
  const int64_t norms = 2 * tinyQwenLayers() + 1;
  auto stats = rec->result.statistics;
  EXPECT_EQ(stats["forward_groups"], norms);
  EXPECT_EQ(stats["backward_groups"], norms);
  EXPECT_EQ(rec->result.effect_times, 2 * norms);
  EXPECT_TRUE(rec->result.rejections.empty()) << rec->result.rejections[0].reason;
  EXPECT_TRUE(fusedMatchesUnfused(step.graph, unfused, step.feed, GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RmsNormOnTinyQwen,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const auto &info) { return std::string(dtypeName(info.param)); });

TEST(RmsNormFusion, FusesEveryNormOfQwen14B) {
  Qwen14bTrainingStep big = qwen14bTrainingStep(DType::F16);
  ASSERT_GT(big.graph.numNodes(), 0u);
  Graph *train = &big.graph;
  passes::PipelineReport report = runPasses(*train, onlyFusionPass("ascend910b", kPass));
  const passes::PassRecord *rec = report.find(kPass);
  ASSERT_NE(rec, nullptr);
  const int64_t norms = 2 * big.layers + 1;
  auto stats = rec->result.statistics;
  EXPECT_EQ(stats["forward_groups"], norms);
  EXPECT_EQ(stats["backward_groups"], norms);
}

} // namespace
} // namespace kiln::testing
