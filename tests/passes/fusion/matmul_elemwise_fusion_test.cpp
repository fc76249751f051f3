// ATbeMatmulElemwiseFusionPass: a MatMul/BatchMatMul and a short chain of
// elementwise/broadcast ops become one Storage group (numerics exactly as
// unfused); the chain rules, the UB budget (passes/fusion/ub_budget.h) that
// bounds it, every rejection
// reason, and its place after TbeMatmulFixPipeFusionPass.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ops/op_builder.h"
#include "ops/op_verifier.h"
#include "passes/pass_registry.h"
#include "tests/support/pass_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

const char *kPass = "ATbeMatmulElemwiseFusionPass";

passes::PassResult runPass(Graph &g, const passes::PassContext &ctx) {
  return runOnePass(g, kPass, ctx);
}
passes::PassResult runPass(Graph &g) { return runOnePass(g, kPass); }

using Names = std::vector<std::string>;

// x [4,8] times w [16,8] transposed in `dtype`, with random data in the feed.
TEST(MatmulElemwiseFusion, GroupsTheScaledMaskedAttentionScores) {
  Graph g("t");
  ops::TensorMap feed;
  for (const char *name : {"q", "k"}) {
    TensorType type{DType::F16, {1, 2, 8, 4}};
    feed[name] = randomTensor(type, name[0], -2.0f, 2.0f);
    g.addInput(name, type, InputRole::Data);
  }
  ops::OpBuilder b(g);
  ValueId scores =
      b.create("BatchMatMul", "scores", {g.findInput("q")->value, g.findInput("k")->value},
               {{"transpose_b", true}});
  ValueId scale = b.create("Div", "scale", {scores, b.constant(2.0, DType::F16, "factor")});
  ValueId masked = b.create("CausalMask", "mask", {scale}, {{"fill", -65504.0}});
  g.addOutput("p", b.create("Softmax", "softmax", {masked}, {{"axis", int64_t{3}}}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  const Graph unfused = g;

  passes::PassResult r = runPass(g);
  EXPECT_EQ(r.match_times, 1);
  EXPECT_EQ(r.effect_times, 1);
  EXPECT_EQ(r.statistics.at("epilogue_ops"), 2);
  ASSERT_EQ(g.groups().size(), 1u);
  EXPECT_EQ(g.groups()[0],
            (FusionGroup{"fused.scores", "matmul_elemwise", kPass, Intermediates::Storage}));
  EXPECT_EQ(groupMemberNames(g, "scores"), (Names{"scores", "scale", "mask"}));

  // Storage intermediates round as the unfused ops do: the same bits.
  auto before = ops::interpret(unfused, feed);
  auto after = ops::interpret(g, feed);
  ASSERT_TRUE(before && after);
  EXPECT_EQ(before->at("p"), after->at("p"));
}

TEST(MatmulElemwiseFusion, AbsorbsReshapesBetweenOpsAndDropsTrailingOnes) {
  MatMulCase c(DType::F16, 53);
  ValueId residual = c.input("residual", {DType::F16, {1, 4, 16}});
  ops::OpBuilder b(c.g);
  ValueId up =
      b.create("Reshape", "unflatten", {c.mm}, {{"shape", std::vector<int64_t>{1, 4, 16}}});
  ValueId sum = b.create("Add", "residual_add", {residual, up});
  c.g.addOutput("y",
                b.create("Reshape", "flatten", {sum}, {{"shape", std::vector<int64_t>{4, 16}}}));
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.effect_times, 1);
  EXPECT_EQ(groupMemberNames(c.g, "mm"), (Names{"mm", "unflatten", "residual_add"}));
  EXPECT_EQ(r.statistics.at("reshapes_absorbed"), 1);
}

TEST(MatmulElemwiseFusion, RejectsOpsThatAreNotElementwiseOrBroadcast) {
  MatMulCase c(DType::F16, 53);
  ops::OpBuilder b(c.g);
  c.g.addOutput("y", b.create("Softmax", "softmax", {c.mm}));
  ValueId mm2 = b.create("MatMul", "mm2", {c.x, c.w}, {{"transpose_b", true}});
  c.g.addOutput("z", b.create("Transpose", "t", {mm2}, {{"perm", std::vector<int64_t>{1, 0}}}));
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.match_times, 2);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_EQ(reasonFor(r, "mm"), "no elementwise epilogue: Softmax 'softmax' is reduce; the "
                                "vector epilogue takes elementwise and broadcast ops");
  EXPECT_EQ(reasonFor(r, "mm2"), "no elementwise epilogue: Transpose 't' is injective; the vector "
                                 "epilogue takes elementwise and broadcast ops");
}

TEST(MatmulElemwiseFusion, RejectsAnOpThatGrowsTheResult) {
  MatMulCase c(DType::F16, 53);
  ValueId big = c.input("big", {DType::F16, {2, 4, 16}});
  ops::OpBuilder b(c.g);
  c.g.addOutput("y", b.create("Mul", "mul", {c.mm, big}));
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_EQ(reasonFor(r, "mm"), "no elementwise epilogue: Mul 'mul' turns f16[4,16] into "
                                "f16[2,4,16]; an epilogue op keeps the shape of the cube result");
}

TEST(MatmulElemwiseFusion, StopsAtAValueWithSeveralUsers) {
  MatMulCase c(DType::F16, 53);
  ops::OpBuilder b(c.g);
  ValueId act = b.create("Silu", "act", {c.mm});
  c.g.addOutput("y", b.create("Neg", "neg", {act}));
  c.g.addOutput("z", b.create("Exp", "exp", {act}));
  ValueId mm2 = b.create("MatMul", "mm2", {c.x, c.w}, {{"transpose_b", true}});
  c.g.addOutput("s", b.create("Sigmoid", "sig", {mm2}));
  c.g.addOutput("t", b.create("SiluGrad", "silu_grad", {c.g.findOutput("s")->value, mm2}));
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.effect_times, 1);
  EXPECT_EQ(groupMemberNames(c.g, "mm"), (Names{"mm", "act"}));
  EXPECT_EQ(reasonFor(r, "mm2"),
            "no elementwise epilogue: the result of MatMul 'mm2' has 2 users (Sigmoid 'sig', "
            "SiluGrad 'silu_grad'); an epilogue link must be its only user");
}

// ascend910b with a small UB and 1024-element tiles, for budget tests.
passes::PassContext smallUb(int64_t ub_bytes) {
  passes::PassContext base = onlyFusionPass("ascend910b", kPass);
  target::Target t = base.target();
  t.vector_tile_elements = 1024;
  t.memory.ub_bytes = ub_bytes;
  return passes::PassContext(t, base.switches());
}

TEST(MatmulElemwiseFusion, TheUbBudgetBoundsTheChain) {
  // f32 [32,64] in tiles of 1024 elements: 4 KiB a buffer. The cube result
  // read in and one Neg result stored, both double-buffered, take 16 KiB; a
  // second Neg adds the first one's result as a 4 KiB intermediate.
  auto build = [](Graph &g) {
    ValueId x = g.addInput("x", {DType::F32, {32, 16}}, InputRole::Data);
    ValueId w = g.addInput("w", {DType::F32, {16, 64}}, InputRole::Data);
    ops::OpBuilder b(g);
    ValueId v = b.create("MatMul", "mm", {x, w});
    for (const char *name : {"neg1", "neg2", "neg3"})
      v = b.create("Neg", name, {v});
    g.addOutput("y", v);
  };
  Graph fits("t"), two("t"), tight("t");
  build(fits);
  build(two);
  build(tight);
  passes::PassResult r = runPass(fits, smallUb(16384));
  EXPECT_EQ(r.effect_times, 1);
  EXPECT_EQ(groupMemberNames(fits, "mm"), (Names{"mm", "neg1"}));
  EXPECT_EQ(r.statistics.at("chains_cut_by_ub"), 1);
  EXPECT_EQ(runPass(two, smallUb(16384 + 4096)).statistics.at("epilogue_ops"), 2);

  r = runPass(tight, smallUb(16383));
  EXPECT_EQ(r.effect_times, 0);
  const std::string why = reasonFor(r, "mm");
  EXPECT_NE(why.find("no elementwise epilogue: Neg 'neg1' does not fit in the UB: the epilogue "
                     "needs 16384 bytes"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("16383 bytes of ascend910b"), std::string::npos) << why;
}

TEST(MatmulElemwiseFusion, OnAscend910bNineUnaryOrThreeBinaryF32OpsFit) {
  // ascend910b: 192 KiB UB, 4096-element tiles of 16 KiB in f32, 12 buffers.
  // n unary ops: the cube result in (2), n - 1 intermediates, the result out
  // (2): n = 9. With a full-size operand each (2 more per op): 3n + 3, n = 3.
  auto build = [](Graph &g, bool binary, int ops) {
    ValueId x = g.addInput("x", {DType::F32, {64, 16}}, InputRole::Data);
    ValueId w = g.addInput("w", {DType::F32, {16, 128}}, InputRole::Data);
    ops::OpBuilder b(g);
    ValueId v = b.create("MatMul", "mm", {x, w});
    for (int i = 0; i < ops; ++i) {
      const std::string name = "op" + std::to_string(i);
      if (binary) {
        ValueId o = g.addInput("o" + std::to_string(i), {DType::F32, {64, 128}}, InputRole::Data);
        v = b.create("Mul", name, {v, o});
      } else {
        v = b.create("Neg", name, {v});
      }
    }
    g.addOutput("y", v);
  };
  Graph unary("t"), binary("t");
  build(unary, false, 11);
  build(binary, true, 5);
  passes::PassResult ru = runPass(unary);
  passes::PassResult rb = runPass(binary);
  EXPECT_EQ(ru.statistics.at("epilogue_ops"), 9);
  EXPECT_EQ(rb.statistics.at("epilogue_ops"), 3);
  EXPECT_EQ(ru.statistics.at("chains_cut_by_ub"), 1);
  EXPECT_EQ(rb.statistics.at("chains_cut_by_ub"), 1);
}

TEST(MatmulElemwiseFusion, AnOperandSmallerThanATileTakesItsOwnSize) {
  // A scalar f32 operand takes 4 bytes, double-buffered 8, beside the cube
  // result in and the product out (16 KiB, as above).
  auto build = [](Graph &g) {
    ValueId x = g.addInput("x", {DType::F32, {32, 16}}, InputRole::Data);
    ValueId w = g.addInput("w", {DType::F32, {16, 64}}, InputRole::Data);
    ValueId s = g.addInput("s", {DType::F32, {}}, InputRole::Data);
    ops::OpBuilder b(g);
    g.addOutput("y", b.create("Mul", "scale", {b.create("MatMul", "mm", {x, w}), s}));
  };
  Graph fits("t"), tight("t");
  build(fits);
  build(tight);
  EXPECT_EQ(runPass(fits, smallUb(16384 + 8)).effect_times, 1);
  EXPECT_EQ(runPass(tight, smallUb(16384 + 7)).effect_times, 0);
}

TEST(MatmulElemwiseFusion, LeavesWhatFixPipeTookOnAscend910bAndTakesItOnAscend910) {
  auto build = [](Graph &g) {
    ValueId x = g.addInput("x", {DType::F16, {4, 8}}, InputRole::Data);
    ValueId w = g.addInput("w", {DType::F16, {8, 16}}, InputRole::Data);
    ops::OpBuilder b(g);
    g.addOutput("y", b.create("Cast", "to_f32", {b.create("MatMul", "mm", {x, w})},
                              {{"dtype", DType::F32}}));
  };
  auto both = [](const std::string &target) {
    passes::SwitchLayer layer = switchPasses({{kPass, true}, {"TbeMatmulFixPipeFusionPass", true}});
    layer.all[passes::PassGroup::GraphFusion] = false;
    layer.all[passes::PassGroup::UBFusion] = false;
    return contextFor(target, {layer});
  };
  Graph on910b("t"), on910("t");
  build(on910b);
  build(on910);
  passes::PipelineReport rb = runPasses(on910b, both("ascend910b"));
  ASSERT_NE(rb.find(kPass), nullptr);
  EXPECT_EQ(rb.find(kPass)->result.effect_times, 0);
  EXPECT_EQ(reasonFor(rb.find(kPass)->result, "mm"),
            "'mm' is already in fused group 'fused.mm' (formed by TbeMatmulFixPipeFusionPass)");
  passes::PipelineReport r9 = runPasses(on910, both("ascend910"));
  ASSERT_NE(r9.find(kPass), nullptr);
  EXPECT_EQ(r9.find(kPass)->result.effect_times, 1);
  ASSERT_EQ(on910.groups().size(), 1u);
  EXPECT_EQ(on910.groups()[0].formed_by, kPass);
}

TEST(MatmulElemwiseFusion, StopsAtANodeInAGroup) {
  MatMulCase c(DType::F16, 53);
  ops::OpBuilder b(c.g);
  c.g.addOutput("y", b.create("Neg", "neg", {c.mm}));
  GroupId grp = c.g.addGroup(FusionGroup{"g", "eltwise", "test", Intermediates::Storage});
  c.g.node(c.g.findNode("neg")).group = grp;
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_EQ(reasonFor(r, "mm"),
            "no elementwise epilogue: 'neg' is already in fused group 'g' (formed by test)");
}

TEST(MatmulElemwiseFusion, SwitchedOffFormsNoGroup) {
  MatMulCase c(DType::F16, 53);
  ops::OpBuilder b(c.g);
  c.g.addOutput("y", b.create("Neg", "neg", {c.mm}));
  passes::PipelineReport report =
      runPasses(c.g, contextFor("ascend910b", {switchPasses({{kPass, false}})}));
  ASSERT_NE(report.find(kPass), nullptr);
  EXPECT_FALSE(report.find(kPass)->ran);
  for (const FusionGroup &grp : c.g.groups())
    EXPECT_NE(grp.formed_by, kPass);
}

} // namespace
} // namespace kiln::testing
