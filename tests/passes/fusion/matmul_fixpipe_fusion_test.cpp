// TbeMatmulFixPipeFusionPass: a MatMul/BatchMatMul and the FixPipe epilogue
// after it (Cast to a float dtype, BiasAdd, ...) become one F32 group; the
// chain rules, every rejection reason, and the targets without FixPipe.
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

const char *kPass = "TbeMatmulFixPipeFusionPass";

passes::PassResult runPass(Graph &g, const std::string &target = "ascend910b") {
  return runOnePass(g, kPass, target);
}

using Names = std::vector<std::string>;

// x [4,8] times w [16,8] transposed in f16, with random data in the feed.
TEST(MatmulFixPipeFusion, GroupsAMatMulWithItsCastToF32) {
  MatMulCase c;
  ops::OpBuilder b(c.g);
  c.g.addOutput("y", b.create("Cast", "to_f32", {c.mm}, {{"dtype", DType::F32}}));
  const Graph unfused = c.g;
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.match_times, 1);
  EXPECT_EQ(r.effect_times, 1);
  EXPECT_TRUE(r.rejections.empty());
  EXPECT_EQ(r.statistics.at("epilogue.Cast"), 1);
  ASSERT_EQ(c.g.groups().size(), 1u);
  EXPECT_EQ(c.g.groups()[0],
            (FusionGroup{"fused.mm", "matmul_fixpipe", kPass, Intermediates::F32}));
  EXPECT_EQ(groupMemberNames(c.g, "mm"), (Names{"mm", "to_f32"}));

  // FixPipe writes the f32 accumulator out: the same as an f32 MatMul of the
  // f16 operands, without the f16 rounding the unfused MatMul makes.
  Graph reference("ref");
  ops::OpBuilder rb(reference);
  ValueId rx = rb.create("Cast", "x32", {reference.addInput("x", c.g.type(c.x), InputRole::Data)},
                         {{"dtype", DType::F32}});
  ValueId rw = rb.create("Cast", "w32", {reference.addInput("w", c.g.type(c.w), InputRole::Data)},
                         {{"dtype", DType::F32}});
  reference.addOutput("y", rb.create("MatMul", "mm", {rx, rw}, {{"transpose_b", true}}));
  auto want = ops::interpret(reference, c.feed);
  auto got = ops::interpret(c.g, c.feed);
  auto before = ops::interpret(unfused, c.feed);
  ASSERT_TRUE(want && got && before);
  EXPECT_EQ(got->at("y"), want->at("y"));
  EXPECT_NE(before->at("y"), want->at("y"));
}

TEST(MatmulFixPipeFusion, TakesBiasAddAndCastAcrossAReshapeAndDropsATrailingOne) {
  MatMulCase c;
  ValueId bias = c.input("bias", {DType::F16, {16}});
  ops::OpBuilder b(c.g);
  // The Reshape keeps the last dimension, so the bias still runs along the columns.
  ValueId r1 =
      b.create("Reshape", "unflatten", {c.mm}, {{"shape", std::vector<int64_t>{2, 2, 16}}});
  ValueId add = b.create("BiasAdd", "bias_add", {r1, bias});
  ValueId cast = b.create("Cast", "to_f32", {add}, {{"dtype", DType::F32}});
  c.g.addOutput("y", b.create("Reshape", "flatten", {cast}, {{"shape", std::vector<int64_t>{64}}}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.effect_times, 1);
  EXPECT_EQ(groupMemberNames(c.g, "mm"), (Names{"mm", "unflatten", "bias_add", "to_f32"}));
  EXPECT_EQ(r.statistics.at("epilogue.BiasAdd"), 1);
  EXPECT_EQ(r.statistics.at("epilogue.Cast"), 1);
  EXPECT_EQ(r.statistics.at("reshapes_absorbed"), 1);
  EXPECT_EQ(c.g.node(c.g.findNode("flatten")).group, kNoGroup);
}

TEST(MatmulFixPipeFusion, TakesEachFixPipeOpOnce) {
  MatMulCase c;
  ops::OpBuilder b(c.g);
  ValueId up = b.create("Cast", "to_f32", {c.mm}, {{"dtype", DType::F32}});
  c.g.addOutput("y", b.create("Cast", "to_bf16", {up}, {{"dtype", DType::BF16}}));
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.effect_times, 1);
  EXPECT_EQ(groupMemberNames(c.g, "mm"), (Names{"mm", "to_f32"}));
}

TEST(MatmulFixPipeFusion, RejectsAChainWithoutAFixPipeOpNamingTheTargetsList) {
  MatMulCase c;
  ops::OpBuilder b(c.g);
  c.g.addOutput("y", b.create("Neg", "neg", {c.mm}));
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.match_times, 1);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_TRUE(c.g.groups().empty());
  const std::string why = reasonFor(r, "mm");
  EXPECT_NE(why.find("Neg 'neg' is not an epilogue FixPipe applies on ascend910b"),
            std::string::npos)
      << why;
  auto target = target::loadTarget("ascend910b");
  ASSERT_TRUE(target) << target.message();
  for (const std::string &op : target->fixpipe.epilogue_ops)
    EXPECT_NE(why.find(op), std::string::npos) << op << " missing from: " << why;
}

TEST(MatmulFixPipeFusion, RejectsACastToAnInteger) {
  MatMulCase c;
  ops::OpBuilder b(c.g);
  c.g.addOutput("y", b.create("Cast", "to_i32", {c.mm}, {{"dtype", DType::I32}}));
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_EQ(reasonFor(r, "mm"), "no FixPipe epilogue: Cast 'to_i32' converts to i32; FixPipe "
                                "converts the f32 accumulator only to a float dtype");
}

TEST(MatmulFixPipeFusion, RejectsAResultWithSeveralUsersOrThatIsAGraphOutput) {
  MatMulCase c;
  ops::OpBuilder b(c.g);
  c.g.addOutput("y", b.create("Cast", "to_f32", {c.mm}, {{"dtype", DType::F32}}));
  c.g.addOutput("z", b.create("Neg", "neg", {c.mm}));
  ValueId mm2 = b.create("MatMul", "mm2", {c.x, c.w}, {{"transpose_b", true}});
  c.g.addOutput("raw", mm2);
  c.g.addOutput("up", b.create("Cast", "up", {mm2}, {{"dtype", DType::F32}}));
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.match_times, 2);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_EQ(reasonFor(r, "mm"),
            "no FixPipe epilogue: the result of MatMul 'mm' has 2 users (Cast 'to_f32', Neg "
            "'neg'); an epilogue link must be its only user");
  EXPECT_NE(reasonFor(r, "mm2").find("the result of MatMul 'mm2' is a graph output"),
            std::string::npos);
}

TEST(MatmulFixPipeFusion, BiasAddMustStillRunAlongTheMatMulsColumns) {
  MatMulCase c;
  ValueId b8 = c.input("b8", {DType::F16, {8}});
  ops::OpBuilder b(c.g);
  ValueId r8 = b.create("Reshape", "to_8x8", {c.mm}, {{"shape", std::vector<int64_t>{8, 8}}});
  c.g.addOutput("y", b.create("BiasAdd", "bias_add", {r8, b8}));
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_EQ(reasonFor(r, "mm"),
            "no FixPipe epilogue: BiasAdd 'bias_add' adds along the last dimension of Reshape "
            "'to_8x8', which is not the matmul's; FixPipe adds a bias per column");
}

TEST(MatmulFixPipeFusion, GroupsABatchMatMul) {
  Graph g("t");
  ValueId a = g.addInput("a", {DType::BF16, {2, 4, 8}}, InputRole::Data);
  ValueId w = g.addInput("w", {DType::BF16, {2, 8, 16}}, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId bmm = b.create("BatchMatMul", "bmm", {a, w});
  g.addOutput("y", b.create("Cast", "to_f32", {bmm}, {{"dtype", DType::F32}}));
  passes::PassResult r = runPass(g);
  EXPECT_EQ(r.effect_times, 1);
  EXPECT_EQ(groupMemberNames(g, "bmm"), (Names{"bmm", "to_f32"}));
}

TEST(MatmulFixPipeFusion, LeavesGroupedNodesAlone) {
  MatMulCase c;
  ops::OpBuilder b(c.g);
  c.g.addOutput("y", b.create("Cast", "to_f32", {c.mm}, {{"dtype", DType::F32}}));
  ValueId mm2 = b.create("MatMul", "mm2", {c.x, c.w}, {{"transpose_b", true}});
  c.g.addOutput("z", b.create("Cast", "up", {mm2}, {{"dtype", DType::F32}}));
  GroupId cast_group = c.g.addGroup(FusionGroup{"g1", "eltwise", "test", Intermediates::Storage});
  c.g.node(c.g.findNode("to_f32")).group = cast_group;
  GroupId mm_group = c.g.addGroup(FusionGroup{"g2", "matmul", "test", Intermediates::Storage});
  c.g.node(c.g.findNode("mm2")).group = mm_group;
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.match_times, 2);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_EQ(reasonFor(r, "mm"),
            "no FixPipe epilogue: 'to_f32' is already in fused group 'g1' (formed by test)");
  EXPECT_EQ(reasonFor(r, "mm2"), "'mm2' is already in fused group 'g2' (formed by test)");
}

TEST(MatmulFixPipeFusion, DoesNotApplyOnATargetWithoutFixPipe) {
  MatMulCase c;
  ops::OpBuilder b(c.g);
  c.g.addOutput("y", b.create("Cast", "to_f32", {c.mm}, {{"dtype", DType::F32}}));
  passes::PipelineReport report = runPasses(c.g, onlyFusionPass("ascend910", kPass));
  const passes::PassRecord *rec = report.find(kPass);
  ASSERT_NE(rec, nullptr);
  EXPECT_TRUE(rec->enabled);
  EXPECT_FALSE(rec->ran);
  EXPECT_EQ(rec->not_applicable, "target ascend910 has no FixPipe (fix_pipe_l0c2out); "
                                 "TbeMatmulFixPipeFusionPass fuses nothing there");
  EXPECT_EQ(rec->result.effect_times, 0);
  for (const FusionGroup &grp : c.g.groups())
    EXPECT_NE(grp.formed_by, kPass);
}

TEST(MatmulFixPipeFusion, SwitchedOffFormsNoGroup) {
  MatMulCase c;
  ops::OpBuilder b(c.g);
  c.g.addOutput("y", b.create("Cast", "to_f32", {c.mm}, {{"dtype", DType::F32}}));
  passes::PipelineReport report =
      runPasses(c.g, contextFor("ascend910b", {switchPasses({{kPass, false}})}));
  ASSERT_NE(report.find(kPass), nullptr);
  EXPECT_FALSE(report.find(kPass)->enabled);
  EXPECT_FALSE(report.find(kPass)->ran);
  for (const FusionGroup &grp : c.g.groups())
    EXPECT_NE(grp.formed_by, kPass);
}

} // namespace
} // namespace kiln::testing
