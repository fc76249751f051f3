// MatMulBiasAddFusionPass: a BiasAdd (or Add of a 1-D tensor) after a MatMul
// folds into the MatMul's bias input, which adds it in f32 before the one
// rounding; every CANN condition that fails leaves the graph alone and says why.
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

const char *kPass = "MatMulBiasAddFusionPass";

// Runs the pass alone; with `verify`, compacts and verifies as the pass
// manager would.
passes::PassResult runPass(Graph &g, bool verify = true) {
  return runOnePass(g, kPass, contextFor("ascend910b"), verify);
}

// x [4,8] times w [16,8] transposed, the c_attn layout, in `dtype`.
TEST(MatMulBiasAddFusion, FoldsBiasAddIntoTheMatMulsBiasInput) {
  MatMulCase c(DType::F16, 7);
  ValueId bias = c.input("bias", {DType::F16, {16}});
  ops::OpBuilder b(c.g);
  ValueId y = b.create("BiasAdd", "mm.bias_add", {c.mm, bias});
  c.g.addOutput("sum", y);
  c.g.addOutput("neg", b.create("Neg", "neg", {y}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  const Graph unfused = c.g;

  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.match_times, 1);
  EXPECT_EQ(r.effect_times, 1);
  EXPECT_TRUE(r.rejections.empty());
  EXPECT_EQ(r.statistics.at("bias_add_folded"), 1);

  EXPECT_EQ(c.g.findNode("mm.bias_add"), kNoNode);
  const Node &mm = c.g.node(c.g.findNode("mm"));
  ASSERT_EQ(mm.inputs.size(), 3u);
  EXPECT_EQ(c.g.valueName(mm.inputs[2]), "bias");
  EXPECT_EQ(mm.provenance, (Provenance{kPass, {"mm", "mm.bias_add"}}));
  // Every user of the add, graph outputs included, reads the MatMul now.
  EXPECT_EQ(c.g.valueName(c.g.findOutput("sum")->value), "mm");
  EXPECT_EQ(c.g.valueName(c.g.node(c.g.findNode("neg")).inputs[0]), "mm");

  // The oracle: one MatMul with the bias, which rounds once.
  Graph reference("ref");
  ValueId rx = reference.addInput("x", c.g.type(c.x), InputRole::Data);
  ValueId rw = reference.addInput("w", c.g.type(c.w), InputRole::Data);
  ValueId rb = reference.addInput("bias", {DType::F16, {16}}, InputRole::Data);
  ops::OpBuilder rbld(reference);
  reference.addOutput("sum", rbld.create("MatMul", "mm", {rx, rw, rb}, {{"transpose_b", true}}));
  auto want = ops::interpret(reference, c.feed);
  auto got = ops::interpret(c.g, c.feed);
  auto before = ops::interpret(unfused, c.feed);
  ASSERT_TRUE(want && got && before);
  EXPECT_EQ(got->at("sum"), want->at("sum"));
  EXPECT_TRUE(outputsAgree(*before, *got, 2e-2, 2e-4));
}

TEST(MatMulBiasAddFusion, FoldsAnAddOfA1DOperandOnEitherSide) {
  MatMulCase c(DType::F32, 7);
  ValueId bias = c.input("bias", {DType::F32, {16}});
  ops::OpBuilder b(c.g);
  c.g.addOutput("y", b.create("Add", "add", {bias, c.mm}));
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.effect_times, 1);
  EXPECT_EQ(r.statistics.at("add_folded"), 1);
  EXPECT_EQ(c.g.findNode("add"), kNoNode);
  EXPECT_EQ(c.g.valueName(c.g.node(c.g.findNode("mm")).inputs[2]), "bias");
}

TEST(MatMulBiasAddFusion, RejectsAMatMulThatHasABiasAlready) {
  MatMulCase c(DType::F16, 7);
  ValueId b0 = c.input("b0", {DType::F16, {16}}), b1 = c.input("b1", {DType::F16, {16}});
  ops::OpBuilder b(c.g);
  ValueId mm2 = b.create("MatMul", "mm2", {c.x, c.w, b0}, {{"transpose_b", true}});
  c.g.addOutput("y", b.create("BiasAdd", "add", {mm2, b1}));
  c.g.addOutput("unused", c.mm);
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_EQ(reasonFor(r, "mm2"), "MatMul 'mm2' already has a bias input");
  EXPECT_NE(c.g.findNode("add"), kNoNode);
}

TEST(MatMulBiasAddFusion, RejectsAMatMulWithOtherUsers) {
  MatMulCase c(DType::F16, 7);
  ValueId bias = c.input("bias", {DType::F16, {16}});
  ops::OpBuilder b(c.g);
  c.g.addOutput("y", b.create("BiasAdd", "add", {c.mm, bias}));
  c.g.addOutput("z", b.create("Neg", "neg", {c.mm}));
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_EQ(reasonFor(r, "mm"), "MatMul 'mm' has 2 users (BiasAdd 'add', Neg 'neg'); the bias "
                                "folds only when an add is the matmul's only user");
}

TEST(MatMulBiasAddFusion, RejectsAMatMulThatIsAGraphOutput) {
  MatMulCase c(DType::F16, 7);
  ValueId bias = c.input("bias", {DType::F16, {16}});
  ops::OpBuilder b(c.g);
  c.g.addOutput("y", b.create("BiasAdd", "add", {c.mm, bias}));
  c.g.addOutput("raw", c.mm);
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_NE(reasonFor(r, "mm").find("MatMul 'mm' is a graph output"), std::string::npos);
}

TEST(MatMulBiasAddFusion, RejectsAMatMulNotFollowedByAnAdd) {
  MatMulCase c(DType::F16, 7);
  ops::OpBuilder b(c.g);
  c.g.addOutput("y", b.create("Neg", "neg", {c.mm}));
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.match_times, 1);
  EXPECT_EQ(reasonFor(r, "mm"), "MatMul 'mm' is followed by Neg 'neg', not by BiasAdd or Add");
}

TEST(MatMulBiasAddFusion, RejectsAnAddWhoseOperandIsNotA1DBias) {
  MatMulCase c(DType::F16, 7);
  ValueId full = c.input("full", {DType::F16, {4, 16}});
  ValueId one = c.input("one", {DType::F16, {1}});
  ops::OpBuilder b(c.g);
  c.g.addOutput("y", b.create("Add", "add", {c.mm, full}));
  ValueId mm2 = b.create("MatMul", "mm2", {c.x, c.w}, {{"transpose_b", true}});
  c.g.addOutput("z", b.create("Add", "add2", {mm2, one}));
  ValueId mm3 = b.create("MatMul", "mm3", {c.x, c.w}, {{"transpose_b", true}});
  c.g.addOutput("s", b.create("Add", "twice", {mm3, mm3}));
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.match_times, 3);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_EQ(reasonFor(r, "mm"),
            "MatMul 'mm' + Add 'add': the operand full f16[4,16] is not a 1-D bias");
  EXPECT_EQ(reasonFor(r, "mm2"), "MatMul 'mm2' + Add 'add2': the bias length 1 is not the "
                                 "result's last dimension 16");
  EXPECT_EQ(reasonFor(r, "mm3"), "Add 'twice' adds the result to itself; no bias to fold");
}

TEST(MatMulBiasAddFusion, RejectsABatchMatMulWhoseResultIsNot2D) {
  Graph g("t");
  ValueId a = g.addInput("a", {DType::F16, {2, 4, 8}}, InputRole::Data);
  ValueId w = g.addInput("w", {DType::F16, {2, 8, 16}}, InputRole::Data);
  ValueId bias = g.addInput("bias", {DType::F16, {16}}, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId bmm = b.create("BatchMatMul", "bmm", {a, w});
  g.addOutput("y", b.create("BiasAdd", "add", {bmm, bias}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  passes::PassResult r = runPass(g);
  EXPECT_EQ(r.match_times, 1);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_EQ(reasonFor(r, "bmm"), "BatchMatMul 'bmm' + BiasAdd 'add': the result f16[2,4,16] is "
                                 "not 2-D; the bias folds only into a 2-D MatMul");
}

TEST(MatMulBiasAddFusion, RejectsABiasOfAnotherDType) {
  // Verified graphs cannot hold this (BiasAdd wants one dtype), so the node
  // is added without inference and the pass runs without the manager.
  MatMulCase c(DType::F16, 7);
  ValueId bias = c.input("bias", {DType::F32, {16}});
  NodeId add =
      c.g.addNode("BiasAdd", "add", {c.mm, bias}, {TensorType{DType::F16, {4, 16}}}, {}, {});
  c.g.addOutput("y", c.g.node(add).outputs[0]);
  passes::PassResult r = runPass(c.g, /*verify=*/false);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_EQ(reasonFor(r, "mm"),
            "MatMul 'mm' + BiasAdd 'add': the bias dtype f32 is not the result's f16");
}

TEST(MatMulBiasAddFusion, LeavesGroupedNodesAlone) {
  MatMulCase c(DType::F16, 7);
  ValueId bias = c.input("bias", {DType::F16, {16}});
  ops::OpBuilder b(c.g);
  c.g.addOutput("y", b.create("BiasAdd", "add", {c.mm, bias}));
  GroupId grp = c.g.addGroup(FusionGroup{"fused.add", "eltwise", "test", Intermediates::Storage});
  c.g.node(c.g.findNode("add")).group = grp;
  passes::PassResult r = runPass(c.g);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_EQ(reasonFor(r, "mm"), "'add' is already in fused group 'fused.add' (formed by test)");
}

TEST(MatMulBiasAddFusion, SwitchedOffLeavesTheBiasAdd) {
  MatMulCase c(DType::F16, 7);
  ValueId bias = c.input("bias", {DType::F16, {16}});
  ops::OpBuilder b(c.g);
  c.g.addOutput("y", b.create("BiasAdd", "add", {c.mm, bias}));
  passes::PipelineReport report =
      runPasses(c.g, contextFor("ascend910b", {switchPasses({{kPass, false}})}));
  ASSERT_NE(report.find(kPass), nullptr);
  EXPECT_FALSE(report.find(kPass)->ran);
  EXPECT_NE(c.g.findNode("add"), kNoNode);
  EXPECT_EQ(c.g.node(c.g.findNode("mm")).inputs.size(), 2u);
}

} // namespace
} // namespace kiln::testing
