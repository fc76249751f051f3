// Kernels checked against the target before they are compiled: coded errors
// with the kernel, its members, the pass that formed it and the numbers.
#include <gtest/gtest.h>

#include "compiler/codegen/kernel_compiler.h"
#include "ops/op_builder.h"
#include "runtime/executor.h"
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

// A FlashAttentionScore read from a graph file: [1, 2, 8, head] q, k, v.
Graph flashAttention(int64_t head, DType dtype) {
  Graph g("attn");
  const TensorType t{dtype, {1, 2, 8, head}};
  ValueId q = g.addInput("q", t, InputRole::Data), k = g.addInput("k", t, InputRole::Data),
          v = g.addInput("v", t, InputRole::Data);
  ops::OpBuilder b(g);
  std::vector<ValueId> out = b.createMulti("FlashAttentionScore", "layer.attn.flash_attention",
                                           {q, k, v}, {{"scale", 0.125}, {"causal", true}});
  g.addOutput("out", out[0]);
  return g;
}

TEST(TargetCheck, FusedAttentionTheTargetLacksOrCannotTileIsE40006) {
  codegen::KernelCompileFailure missing =
      failureOf(flashAttention(16, DType::F16), targetNamed("ascend910"));
  ASSERT_EQ(missing.diagnostics.size(), 1u);
  EXPECT_EQ(missing.diagnostics[0].code, "E40006");
  EXPECT_NE(missing.diagnostics[0].constraint.find("which ascend910 does not have"),
            std::string::npos)
      << missing.diagnostics[0].constraint;
  // 16 rows of a 4096-wide f16 head are 128 KiB, past the 910B's L0A.
  codegen::KernelCompileFailure wide =
      failureOf(flashAttention(4096, DType::F16), targetNamed("ascend910b"));
  ASSERT_EQ(wide.diagnostics.size(), 1u);
  EXPECT_EQ(wide.diagnostics[0].code, "E40006");
  EXPECT_NE(wide.diagnostics[0].constraint.find("head size 4096 does not fit ascend910b"),
            std::string::npos)
      << wide.diagnostics[0].constraint;
  EXPECT_TRUE(codegen::compileKernels(flashAttention(16, DType::F16), targetNamed("ascend910b"), {},
                                      nullptr)
                  .isOk());
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

namespace kiln::testing {
namespace {

TEST(CompileErrorFallback, AFailingGroupSplitsIntoSingleOpKernels) {
  Graph g = rmsNormGroup(65536);
  auto target = target::loadTarget("ascend910b");
  ASSERT_TRUE(target.isOk());
  codegen::KernelCompileOptions options;
  options.on_error = codegen::OnCompileError::Fallback;
  auto k = codegen::compileKernels(g, *target, options);
  ASSERT_TRUE(k.isOk()) << k.message();
  ASSERT_EQ(k->fallbacks.size(), 1u);
  EXPECT_EQ(k->fallbacks[0].why.code, "E40001");
  EXPECT_EQ(k->fallbacks[0].action, "split into 4 single-op kernels");
  EXPECT_EQ(k->kernels.size(), 4u);
  for (const codegen::CompiledKernel &kernel : k->kernels)
    EXPECT_FALSE(kernel.host);
  EXPECT_NE(codegen::fallbackSummary(k->fallbacks).find("fallback: split into 4"),
            std::string::npos);
}

TEST(CompileErrorFallback, ARunWithFallbacksAgreesWithTheInterpreter) {
  // The split kernels round like single ops, the interpreter keeps the group's
  // f32 intermediates: they agree within f32 rounding.
  Graph g = rmsNormGroup(65536);
  ops::TensorMap inputs = randomInputs(g, 11);
  auto target = target::loadTarget("ascend910b");
  codegen::KernelCompileOptions options;
  options.on_error = codegen::OnCompileError::Fallback;
  auto k = codegen::compileKernels(g, *target, options);
  ASSERT_TRUE(k.isOk()) << k.message();
  auto executor = runtime::Executor::create(g, std::move(*k));
  ASSERT_TRUE(executor.isOk()) << executor.message();
  auto got = (*executor)->run(inputs);
  ASSERT_TRUE(got.isOk()) << got.message();
  auto want = ops::interpret(g, inputs);
  ASSERT_TRUE(want.isOk());
  EXPECT_EQ(compareTensors(got->at("y"), want->at("y"), 1e-5, 1e-5), "");
}

TEST(CompileErrorFallback, AnOpTheChipCannotRunGoesToTheHost) {
  // bf16 on ascend910: no kernel can be built; the reference kernel runs instead.
  Graph g("bf16");
  ValueId a = g.addInput("a", {DType::BF16, {4, 8}}, InputRole::Data);
  ValueId b = g.addInput("b", {DType::BF16, {8}}, InputRole::Data);
  ops::OpBuilder ob(g);
  g.addOutput("y", ob.create("Add", "add", {a, b}));
  auto target = target::loadTarget("ascend910");
  codegen::KernelCompileOptions options;
  options.on_error = codegen::OnCompileError::Fallback;
  options.object.overflow = OverflowMode::Saturation;
  auto k = codegen::compileKernels(g, *target, options);
  ASSERT_TRUE(k.isOk()) << k.message();
  ASSERT_EQ(k->kernels.size(), 1u);
  EXPECT_TRUE(k->kernels[0].host);
  EXPECT_EQ(k->fallbacks[0].why.code, "E40004");
  EXPECT_EQ(k->fallbacks[0].action, "runs its reference kernel on the host");
  ops::TensorMap inputs = randomInputs(g, 2);
  auto executor = runtime::Executor::create(g, std::move(*k));
  ASSERT_TRUE(executor.isOk()) << executor.message();
  auto got = (*executor)->run(inputs);
  ASSERT_TRUE(got.isOk()) << got.message();
  ops::InterpretOptions saturate;
  saturate.overflow = OverflowMode::Saturation;
  auto want = ops::interpret(g, inputs, saturate);
  ASSERT_TRUE(want.isOk());
  EXPECT_TRUE(got->at("y") == want->at("y")) << "the same kernel: bit for bit";
}

} // namespace
} // namespace kiln::testing
