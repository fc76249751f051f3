// Kernels checked against the target before they are compiled: coded errors
// with the kernel, its members, the pass that formed it and the numbers.
#include <gtest/gtest.h>

#include "compiler/codegen/kernel_compiler.h"
#include "ops/op_builder.h"
#include "tests/support/codegen_test_util.h"

namespace kiln::testing {
namespace {

target::Target targetNamed(const std::string &name) {
  auto t = target::loadTarget(name);
  EXPECT_TRUE(t.isOk());
  return *t;
}

// Groups every node of `g` into one kernel of `kind`, formed by `formed_by`.
void groupAll(Graph &g, const std::string &kind, const std::string &formed_by,
              Intermediates intermediates = Intermediates::F32) {
  GroupId id = g.addGroup(FusionGroup{"fused.test", kind, formed_by, intermediates});
  for (size_t n = 0; n < g.numNodes(); ++n)
    g.node(static_cast<NodeId>(n)).group = id;
}

codegen::KernelCompileFailure failureOf(const Graph &g, const target::Target &target) {
  codegen::KernelCompileFailure failure;
  auto k = codegen::compileKernels(g, target, {}, &failure);
  EXPECT_FALSE(k.isOk());
  if (!k.isOk()) {
    EXPECT_EQ(k.message(), failure.message());
  }
  return failure;
}

// x * rsqrt(mean(x^2)) over rows of `hidden`: a fused row kernel that holds its row.
Graph rmsNormGroup(int64_t hidden) {
  Graph g("rms");
  ValueId x = g.addInput("x", {DType::F32, {4, hidden}}, InputRole::Data);
  ops::OpBuilder b(g);
  auto scope = b.scope("layer.ln");
  ValueId sq = b.create("Mul", "sq", {x, x});
  ValueId mean = b.create("ReduceMean", "mean", {sq}, {{"axes", Shape{-1}}, {"keepdims", true}});
  ValueId y = b.create("Mul", "y", {x, b.create("Rsqrt", "rsqrt", {mean})});
  g.addOutput("y", y);
  groupAll(g, "rms_norm", "MyRowRule");
  return g;
}

TEST(TargetCheck, RowKernelThatCannotFitTheUbIsE40001WithTheNumbers) {
  Graph g = rmsNormGroup(65536);
  codegen::KernelCompileFailure f = failureOf(g, targetNamed("ascend910b"));
  ASSERT_EQ(f.diagnostics.size(), 1u);
  const codegen::KernelDiagnostic &d = f.diagnostics[0];
  EXPECT_EQ(d.code, "E40001");
  EXPECT_EQ(d.kernel, "fused.test");
  EXPECT_EQ(d.formed_by, "MyRowRule");
  ASSERT_EQ(d.members.size(), 4u);
  EXPECT_EQ(d.members[0].name, "layer.ln.sq");
  EXPECT_EQ(d.members[1].op, "ReduceMean");
  EXPECT_NE(d.constraint.find("ascend910b has 192.0 KiB"), std::string::npos) << d.constraint;
  EXPECT_NE(d.constraint.find("256.0 KiB for rows held"), std::string::npos) << d.constraint;
  const std::string text = d.toString();
  EXPECT_NE(text.find("E40001 kernel 'fused.test' (rms_norm, formed by MyRowRule)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("layer.ln.rsqrt (Rsqrt)"), std::string::npos) << text;
  EXPECT_EQ(d.toJson()["members"].size(), 4u);
}

TEST(TargetCheck, TheSameKernelFitsAtAModestRowAndRunsCorrectly) {
  Graph g = rmsNormGroup(1024);
  expectCompiledMatchesReference(g, randomInputs(g, 7));
}

TEST(TargetCheck, ASmallerTileIsChosenBeforeGivingUp) {
  // AdamW streams nine f32 buffers: 4096-element tiles need 224 KiB, 2048 fit.
  Graph g("adamw");
  const TensorType p{DType::F32, {8192}};
  std::vector<ValueId> in;
  for (const char *name : {"param", "grad", "m", "v"})
    in.push_back(g.addInput(name, p, InputRole::Data));
  in.push_back(g.addInput("lr", {DType::F32, {}}, InputRole::Hyperparameter));
  in.push_back(g.addInput("step", {DType::I64, {}}, InputRole::Hyperparameter));
  ops::OpBuilder b(g);
  std::vector<ValueId> outs = b.createMulti("AdamW", "adamw", in);
  for (size_t k = 0; k < outs.size(); ++k)
    g.addOutput("out" + std::to_string(k), outs[k]);
  auto k = codegen::compileKernels(g, targetNamed("ascend910b"), {});
  ASSERT_TRUE(k.isOk()) << k.message();
  EXPECT_EQ(k->kernels[0].tiling.vector_tile_elements, 2048);
  EXPECT_LE(k->kernels[0].tiling.ub_bytes, 192 * 1024);
}

Graph matmulThen(const std::string &op, DType dtype) {
  Graph g("mm");
  ValueId a = g.addInput("a", {dtype, {32, 64}}, InputRole::Data);
  ValueId w = g.addInput("w", {dtype, {64, 48}}, InputRole::Parameter);
  ops::OpBuilder b(g);
  ValueId c = b.create("MatMul", "proj", {a, w});
  g.addOutput("y", op == "Cast" ? b.create("Cast", "out", {c}, {{"dtype", DType::F32}})
                                : b.create(op, "out", {c, c}));
  return g;
}

TEST(TargetCheck, FixPipeCannotApplyAnOpOutsideItsList) {
  Graph g = matmulThen("Mul", DType::F16);
  groupAll(g, "matmul_fixpipe", "MyEpilogueRule");
  codegen::KernelCompileFailure f = failureOf(g, targetNamed("ascend910b"));
  ASSERT_EQ(f.diagnostics.size(), 1u);
  EXPECT_EQ(f.diagnostics[0].code, "E40003");
  EXPECT_NE(f.diagnostics[0].constraint.find("cannot apply Mul ('out')"), std::string::npos)
      << f.diagnostics[0].constraint;
}

TEST(TargetCheck, Ascend910HasNoFixPipe) {
  Graph g = matmulThen("Cast", DType::F16);
  groupAll(g, "matmul_fixpipe", "TbeMatmulFixPipeFusionPass");
  codegen::KernelCompileFailure f = failureOf(g, targetNamed("ascend910"));
  ASSERT_EQ(f.diagnostics.size(), 1u);
  EXPECT_EQ(f.diagnostics[0].code, "E40003");
  EXPECT_NE(f.diagnostics[0].constraint.find("which ascend910 does not have"), std::string::npos);
  // The same kernel on ascend910b compiles and matches the interpreter.
  expectCompiledMatchesReference(g, randomInputs(g, 3));
}

TEST(TargetCheck, DtypesTheChipLacksAreE40004AndE40005) {
  codegen::KernelCompileFailure bf16 =
      failureOf(matmulThen("Add", DType::BF16), targetNamed("ascend910"));
  ASSERT_FALSE(bf16.diagnostics.empty());
  EXPECT_EQ(bf16.diagnostics[0].code, "E40004");
  EXPECT_NE(bf16.diagnostics[0].constraint.find("uses bf16"), std::string::npos);
  codegen::KernelCompileFailure f32 =
      failureOf(matmulThen("Add", DType::F32), targetNamed("ascend910"));
  bool cube = false;
  for (const auto &d : f32.diagnostics)
    cube = cube || (d.code == "E40005" && d.kernel == "proj");
  EXPECT_TRUE(cube) << f32.message();
}

TEST(TargetCheck, MatmulKernelsReportTheirL0cTile) {
  Graph g = matmulThen("Cast", DType::F16);
  groupAll(g, "matmul_fixpipe", "TbeMatmulFixPipeFusionPass");
  auto k = codegen::compileKernels(g, targetNamed("ascend910b"), {});
  ASSERT_TRUE(k.isOk()) << k.message();
  const codegen::KernelTiling &t = k->kernels[0].tiling;
  EXPECT_EQ(t.cube_out_tile[0], 32); // no larger than the 32 x 48 result
  EXPECT_EQ(t.cube_out_tile[1], 64);
  EXPECT_LE(t.l0c_bytes, 128 * 1024);
}

} // namespace
} // namespace kiln::testing
