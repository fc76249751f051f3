// TbeEltwiseFusionPass: greedy producer-consumer groups of vector ops with
// Storage numerics (bit-exact with unfused), convexity and UB-budget
// refusals, other passes' groups left alone, and the tiny Qwen training step.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ops/op_builder.h"
#include "ops/op_verifier.h"
#include "passes/fusion/ub_budget.h"
#include "passes/pass_registry.h"
#include "tests/support/op_test_util.h"
#include "tests/support/pass_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

const char *kPass = "TbeEltwiseFusionPass";

passes::PassResult runPass(Graph &g, const std::string &target = "ascend910b") {
  return runOnePass(g, kPass, target);
}
using Names = std::vector<std::string>;

// Every output has the same type and bytes (outputsAgree cannot compare infinities).
::testing::AssertionResult sameBits(const ops::TensorMap &want, const ops::TensorMap &got) {
  for (const auto &[name, t] : want) {
    auto it = got.find(name);
    if (it == got.end())
      return ::testing::AssertionFailure() << "output '" << name << "' is missing";
    if (!(it->second == t))
      return ::testing::AssertionFailure() << "output '" << name << "' differs";
  }
  return ::testing::AssertionSuccess();
}

TEST(EltwiseFusion, FusesAChainWithItsPrivateConstantIntoOneStorageKernel) {
  Graph g("t");
  ValueId x = g.addInput("x", TensorType{DType::F16, {4, 8}}, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId n = b.create("Neg", "neg", {x});
  ValueId e = b.create("Exp", "exp", {n});
  ValueId k = b.constant(3.0, DType::F16, "three");
  ValueId m = b.create("Mul", "scale", {e, k});
  ValueId c = b.create("Cast", "to_f32", {m}, {{"dtype", DType::F32}});
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  g.addOutput("y", c);

  passes::PassResult r = runPass(g);
  EXPECT_EQ(r.match_times, 1);
  EXPECT_EQ(r.effect_times, 1);
  EXPECT_TRUE(r.rejections.empty());
  ASSERT_EQ(g.groups().size(), 1u);
  const FusionGroup &grp = g.groups()[0];
  EXPECT_EQ(grp.name, "fused.neg");
  EXPECT_EQ(grp.kernel, "eltwise");
  EXPECT_EQ(grp.formed_by, kPass);
  EXPECT_EQ(grp.intermediates, Intermediates::Storage);
  EXPECT_EQ(groupMemberNames(g, "neg"), (Names{"neg", "exp", "three", "scale", "to_f32"}));
}

// Values near f16's limits: any intermediate held wider than f16 would change
// the results (x*300*300 overflows f16 when rounded after each Mul).
TEST(EltwiseFusion, FusedResultsAreBitForBitTheUnfusedOnes) {
  Graph g("t");
  TensorType t{DType::F16, {2, 64}};
  ValueId x = g.addInput("x", t, InputRole::Data);
  ValueId y = g.addInput("y", t, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId k = b.constant(300.0, DType::F16, "k");
  ValueId m1 = b.create("Mul", "m1", {x, k});
  ValueId m2 = b.create("Mul", "m2", {m1, k});
  ValueId d = b.create("Div", "d", {m2, b.constant(1000.0, DType::F16, "thousand")});
  ValueId s = b.create("Silu", "silu", {y});
  ValueId sg = b.create("SiluGrad", "silu_grad", {d, s});
  ValueId sub = b.create("Sub", "sub", {sg, b.create("Exp", "exp", {y})});
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  g.addOutput("out", sub);
  g.addOutput("d", d);
  ops::TensorMap feed{{"x", randomTensor(t, 3, -1.5f, 1.5f)}, {"y", randomTensor(t, 4, -3, 3)}};

  Graph fused = g;
  passes::PassResult r = runPass(fused);
  ASSERT_EQ(r.effect_times, 1);
  EXPECT_EQ(groupMemberNames(fused, "m1").size(), 9u) << "all of it is one kernel";
  auto want = ops::interpret(g, feed);
  auto got = ops::interpret(fused, feed);
  ASSERT_TRUE(want) << want.message();
  ASSERT_TRUE(got) << got.message();
  bool overflowed = false;
  for (int64_t i = 0; i < t.numElements(); ++i)
    overflowed = overflowed || std::isinf(want->at("d").getFloat(i));
  ASSERT_TRUE(overflowed) << "the data must make the rounding visible";
  EXPECT_TRUE(sameBits(*want, *got));
}

TEST(EltwiseFusion, RefusesACandidateThatWouldMakeTheGroupNonConvex) {
  // a -> b -> d = Add(b, r) with r = ReduceSum(a): d would take a path out and back in.
  Graph g("t");
  ValueId x = g.addInput("x", TensorType{DType::F32, {4, 8}}, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId a = b.create("Neg", "a", {x});
  ValueId bb = b.create("Exp", "b", {a});
  ValueId r =
      b.create("ReduceSum", "r", {a}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", true}});
  ValueId d = b.create("Add", "d", {bb, r});
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  g.addOutput("y", d);

  passes::PassResult res = runPass(g);
  EXPECT_EQ(res.effect_times, 1);
  EXPECT_EQ(groupMemberNames(g, "a"), (Names{"a", "b"}));
  EXPECT_TRUE(groupMemberNames(g, "d").empty());
  EXPECT_TRUE(mentions(reasonFor(res, "d"),
                       {"Add 'd' not fused", "joining 'fused.a'",
                        "a path leaves the group through 'r'", "comes back into 'd'"}));
  EXPECT_EQ(res.statistics["convexity_rejections"], 1);
  EXPECT_EQ(res.rejections.size(), 1u) << "the ReduceSum is no candidate, so no line for it";
}

// A chain of f32 unary ops on one tile: with the input and the output
// double-buffered, n ops need (2 + 2 + n - 1) tiles of UB.
Graph unaryChain(int ops) {
  Graph g("chain");
  ValueId v = g.addInput("x", TensorType{DType::F32, {64, 64}}, InputRole::Data);
  ops::OpBuilder b(g);
  for (int i = 0; i < ops; ++i)
    v = b.create(i % 2 ? "Exp" : "Neg", "op" + std::to_string(i), {v});
  g.addOutput("y", v);
  return g;
}

TEST(EltwiseFusion, UbBudgetBoundsTheGroupPerTarget) {
  auto t910 = target::loadTarget("ascend910");
  auto t910b = target::loadTarget("ascend910b");
  ASSERT_TRUE(t910 && t910b);
  ASSERT_EQ(t910->vector_tile_elements, 64 * 64) << "the chain is one tile";
  const int64_t tile = t910->vector_tile_elements * 4;
  auto maxOps = [&](const target::Target &t) { return t.memory.ub_bytes / tile - 3; };
  const int ops = 12;
  ASSERT_LE(ops, maxOps(*t910)) << "the chain must fit ascend910";
  ASSERT_GT(ops, maxOps(*t910b)) << "and not ascend910b";

  Graph on910 = unaryChain(ops);
  passes::PassResult r = runPass(on910, "ascend910");
  EXPECT_EQ(r.effect_times, 1);
  EXPECT_EQ(groupMemberNames(on910, "op0").size(), static_cast<size_t>(ops));
  EXPECT_TRUE(r.rejections.empty());

  Graph on910b = unaryChain(ops);
  r = runPass(on910b, "ascend910b");
  const int64_t first = maxOps(*t910b);
  EXPECT_EQ(groupMemberNames(on910b, "op0").size(), static_cast<size_t>(first));
  const std::string refused = "op" + std::to_string(first);
  EXPECT_EQ(groupMemberNames(on910b, refused).size(), static_cast<size_t>(ops - first))
      << "the rest starts a kernel of its own";
  EXPECT_EQ(r.effect_times, 2);
  EXPECT_EQ(r.statistics["budget_rejections"], 1);
  EXPECT_TRUE(mentions(reasonFor(r, refused),
                       {"not fused: joining 'fused.op0'",
                        "needs " + std::to_string((first + 4) * tile) + " bytes of UB",
                        std::to_string(t910b->memory.ub_bytes) + " bytes of ascend910b"}));
}

TEST(EltwiseFusion, LeavesOtherPassesGroupsAlone) {
  Graph g("t");
  ValueId x = g.addInput("x", TensorType{DType::F32, {4, 8}}, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId a = b.create("Neg", "a", {x});
  ValueId c = b.create("Exp", "c", {b.create("Exp", "bb", {a})});
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  g.addOutput("y", c);
  GroupId other = g.addGroup(FusionGroup{"fused.bb", "other", "OtherPass", Intermediates::F32});
  g.node(g.findNode("bb")).group = other;

  passes::PassResult r = runPass(g);
  EXPECT_EQ(r.effect_times, 0) << "a and c alone are one op each";
  EXPECT_EQ(groupMemberNames(g, "bb"), (Names{"bb"}));
  EXPECT_TRUE(groupMemberNames(g, "a").empty());
  EXPECT_TRUE(mentions(reasonFor(r, "bb"),
                       {"Exp 'bb' not fused", "'bb' is already in fused group 'fused.bb'",
                        "(formed by OtherPass)"}));
}

TEST(EltwiseFusion, ALoneVectorOpIsNoGroupAndNoReport) {
  Graph g("t");
  ValueId x = g.addInput("x", TensorType{DType::F32, {4, 8}}, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId s = b.create("Softmax", "sm", {b.create("Neg", "neg", {x})});
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  g.addOutput("y", s);
  passes::PassResult r = runPass(g);
  EXPECT_EQ(r.match_times, 0);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_TRUE(r.rejections.empty());
  EXPECT_TRUE(g.groups().empty());
}

TEST(EltwiseFusion, SwitchedOffItFusesNothing) { expectSwitchedOffFusesNothing(kPass); }

class EltwiseOnTinyQwen : public ::testing::TestWithParam<DType> {};

// Storage numerics: the fused step is the unfused one, bit for bit.
TEST_P(EltwiseOnTinyQwen, FusedStepEqualsUnfusedExactly) {
  TinyTrainingStep step = tinyTrainingStep(GetParam());
  Graph unfused = step.graph;
  runPasses(unfused, noFusion("ascend910b"));
  passes::PipelineReport report = runPasses(step.graph, onlyFusionPass("ascend910b", kPass));
  const passes::PassRecord *rec = report.find(kPass);
  ASSERT_NE(rec, nullptr);
  EXPECT_GT(rec->result.effect_times, 0);
  EXPECT_EQ(rec->result.effect_times, static_cast<int64_t>(step.graph.groups().size()));
  auto want = ops::interpret(unfused, step.feed);
  auto got = ops::interpret(step.graph, step.feed);
  ASSERT_TRUE(want) << want.message();
  ASSERT_TRUE(got) << got.message();
  EXPECT_TRUE(sameBits(*want, *got));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, EltwiseOnTinyQwen,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const auto &info) { return std::string(dtypeName(info.param)); });

// On the real graph every kernel the pass made has two ops and fits the UB.
TEST(EltwiseFusion, EveryKernelOfQwen14BFitsTheUb) {
  Qwen14bTrainingStep big = qwen14bTrainingStep(DType::F16);
  ASSERT_GT(big.graph.numNodes(), 0u);
  Graph *train = &big.graph;
  passes::PipelineReport report = runPasses(*train, onlyFusionPass("ascend910b", kPass));
  ASSERT_NE(report.find(kPass), nullptr);
  EXPECT_GT(report.find(kPass)->result.effect_times, 0);
  EXPECT_GT(report.find(kPass)->result.statistics.at("budget_rejections"), 0)
      << "14B tensors are many tiles long, so the budget binds";
  auto target = target::loadTarget("ascend910b");
  ASSERT_TRUE(target) << target.message();
  passes::FusionView view(*train);
  const std::vector<std::vector<NodeId>> members = train->groupMembers();
  for (size_t i = 0; i < members.size(); ++i) {
    EXPECT_GE(members[i].size(), 2u) << train->groups()[i].name;
    passes::UbUsage u = passes::ubUsage(view, members[i], target->vector_tile_elements);
    EXPECT_EQ(passes::checkUbBudget(u, *target).reason(), "") << train->groups()[i].name;
  }
}

} // namespace
} // namespace kiln::testing
