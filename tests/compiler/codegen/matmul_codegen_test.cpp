// Matmul kernels (a BLAS GEMM plus the generated epilogue) against the
// reference interpreter: every transpose, bias and fp32_out combination, the
// batched form, and fused epilogues that read the accumulator per row tile
// or across rows.
#include <gtest/gtest.h>

#include "compiler/codegen/kernel_compiler.h"
#include "executable/kernel_cost.h"
#include "ir/float16.h"
#include "kernels/gemm.h"
#include "ops/op_builder.h"
#include "tests/support/codegen_test_util.h"

namespace kiln::testing {
namespace {

const DType kFloats[] = {DType::F32, DType::F16, DType::BF16};

CompareOptions matmulTolerance(DType d) {
  CompareOptions o;
  // f32 sums of K products in another order than the interpreter's double sums.
  o.rtol = d == DType::F32 ? 1e-5 : (d == DType::F16 ? 2e-3 : 1.6e-2);
  o.atol = d == DType::F32 ? 1e-5 : o.rtol;
  return o;
}

TEST(MatmulCodegen, EveryTransposeBiasAndOutputDtype) {
  for (DType d : kFloats)
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (bool fp32_out : {false, true}) {
          const TensorType a{d, ta ? Shape{24, 37} : Shape{37, 24}};
          const TensorType b{d, tb ? Shape{19, 24} : Shape{24, 19}};
          AttrMap attrs{{"transpose_a", ta}, {"transpose_b", tb}, {"fp32_out", fp32_out}};
          SCOPED_TRACE(std::string(dtypeName(d)) + (ta ? " ta" : "") + (tb ? " tb" : "") +
                       (fp32_out ? " fp32_out" : ""));
          expectOpMatchesReference("MatMul", {a, b}, attrs, matmulTolerance(d));
          expectOpMatchesReference("MatMul", {a, b, {DType::F32, {19}}}, attrs, matmulTolerance(d));
        }
}

TEST(MatmulCodegen, BatchedOverLeadingAxes) {
  for (DType d : kFloats)
    for (bool tb : {false, true}) {
      AttrMap attrs{{"transpose_b", tb}};
      expectOpMatchesReference(
          "BatchMatMul", {{d, {2, 3, 9, 16}}, {d, tb ? Shape{2, 3, 11, 16} : Shape{2, 3, 16, 11}}},
          attrs, matmulTolerance(d));
      expectOpMatchesReference("BatchMatMul", {{d, {4, 16, 9}}, {d, {4, 16, 5}}},
                               {{"transpose_a", true}}, matmulTolerance(d));
    }
}

TEST(MatmulCodegen, LargeEnoughForManyTiles) {
  // 300 rows of 257 columns: tiles split rows, and K = 130 crosses BLAS blocks.
  expectOpMatchesReference("MatMul", {{DType::F16, {300, 130}}, {DType::F16, {130, 257}}}, {},
                           matmulTolerance(DType::F16));
}

// MatMul -> BiasAdd -> Mul(scale) -> Cast(f16), one F32 group: the epilogue
// reads its row of the accumulator while the tile is hot.
Graph epilogueGroup(const std::string &tail) {
  Graph g("epilogue");
  ValueId x = g.addInput("x", {DType::F16, {70, 32}}, InputRole::Data);
  ValueId w = g.addInput("w", {DType::F16, {32, 48}}, InputRole::Parameter);
  ValueId bias = g.addInput("bias", {DType::F16, {48}}, InputRole::Parameter);
  ValueId scale = g.addInput("scale", {DType::F16, {48}}, InputRole::Parameter);
  ops::OpBuilder b(g);
  ValueId c = b.create("MatMul", "mm", {x, w});
  ValueId y = b.create("Mul", "scaled", {b.create("BiasAdd", "bias", {c, bias}), scale});
  if (tail == "transpose") // reads the accumulator across rows
    y = b.create("Transpose", "t", {y}, {{"perm", Shape{1, 0}}});
  g.addOutput("y", b.create("Cast", "out", {y}, {{"dtype", DType::F32}}));
  GroupId id = g.addGroup(FusionGroup{"fused.mm", "matmul_elemwise", "Test", Intermediates::F32});
  for (size_t n = 0; n < g.numNodes(); ++n)
    g.node(static_cast<NodeId>(n)).group = id;
  return g;
}

TEST(MatmulCodegen, FusedEpilogueRunsPerRowTile) {
  Graph g = epilogueGroup("");
  auto target = target::loadTarget("ascend910b");
  ASSERT_TRUE(target.isOk());
  auto k = codegen::compileKernels(g, *target, {});
  ASSERT_TRUE(k.isOk()) << k.message();
  ASSERT_EQ(k->kernels.size(), 1u);
  EXPECT_TRUE(k->kernels[0].launch.accumulator_row_local);
  expectCompiledMatchesReference(g, randomInputs(g, 5), matmulTolerance(DType::F16));
}

TEST(MatmulCodegen, EpilogueAcrossRowsUsesTheWholeAccumulator) {
  Graph g = epilogueGroup("transpose");
  auto target = target::loadTarget("ascend910b");
  ASSERT_TRUE(target.isOk());
  auto k = codegen::compileKernels(g, *target, {});
  ASSERT_TRUE(k.isOk()) << k.message();
  EXPECT_FALSE(k->kernels[0].launch.accumulator_row_local);
  expectCompiledMatchesReference(g, randomInputs(g, 6), matmulTolerance(DType::F16));
}

// A linear layer's output unflattened to [batch, seq, n] before its
// epilogue (the residual add of an MLP's down projection): the kernel's
// rows are the GEMM's rows, not one row of the whole result.
TEST(MatmulCodegen, AnUnflattenedEpilogueKeepsTheGemmsRows) {
  for (DType d : {DType::F32, DType::BF16}) {
    Graph g("unflatten");
    ValueId x = g.addInput("x", {d, {70, 32}}, InputRole::Data);
    ValueId w = g.addInput("w", {d, {32, 48}}, InputRole::Parameter);
    ValueId residual = g.addInput("residual", {DType::F32, {7, 10, 48}}, InputRole::Data);
    ops::OpBuilder b(g);
    ValueId c = b.create("MatMul", "mm", {x, w}, {{"fp32_out", true}});
    ValueId y = b.create("Reshape", "unflatten", {c}, {{"shape", Shape{7, 10, 48}}});
    g.addOutput("y", b.create("Add", "residual_add", {y, residual}));
    ASSERT_TRUE(b.status()) << b.status().message();
    GroupId id =
        g.addGroup(FusionGroup{"fused.mm", "matmul_elemwise", "Test", Intermediates::Storage});
    for (size_t n = 0; n < g.numNodes(); ++n)
      g.node(static_cast<NodeId>(n)).group = id;
    auto target = target::loadTarget("ascend910b");
    ASSERT_TRUE(target.isOk());
    auto k = codegen::compileKernels(g, *target, {});
    ASSERT_TRUE(k.isOk()) << k.message();
    ASSERT_EQ(k->kernels.size(), 1u);
    EXPECT_EQ(k->kernels[0].launch.rows, 70) << dtypeName(d);
    EXPECT_TRUE(k->kernels[0].launch.accumulator_row_local) << dtypeName(d);
    expectCompiledMatchesReference(g, randomInputs(g, 8), matmulTolerance(d));
  }
}

// bf16 on the host's bf16 units (oneDNN) against widening to f32 and
// sgemm, every transpose: small integers make every product and sum exact,
// so both must give the same bits; the kernel tests above run the oneDNN
// path whenever the host has the units.
TEST(MatmulCodegen, Bf16UnitsGiveTheWidenedResult) {
  if (!kernels::hostHasBf16Gemm())
    GTEST_SKIP() << "this host has no bf16 units (AVX512-BF16 or AMX)";
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      kernels::GemmPlan plan;
      plan.transpose_a = ta;
      plan.transpose_b = tb;
      plan.batch = 3, plan.m = 37, plan.n = 45, plan.k = 70;
      std::vector<uint16_t> a(plan.batch * plan.m * plan.k), b(plan.batch * plan.k * plan.n);
      for (size_t i = 0; i < a.size(); ++i)
        a[i] = floatToBFloat16(static_cast<float>(static_cast<int>(i * 7 % 17) - 8),
                               OverflowMode::InfNan);
      for (size_t i = 0; i < b.size(); ++i)
        b[i] = floatToBFloat16(static_cast<float>(static_cast<int>(i * 5 % 13) - 6),
                               OverflowMode::InfNan);
      std::vector<float> got(plan.batch * plan.m * plan.n), want(got.size());
      ASSERT_TRUE(kernels::gemmBf16(plan, a.data(), b.data(), got.data()));
      kernels::GemmOperands widened(plan, a.data(), DType::BF16, b.data(), DType::BF16);
      kernels::gemmRows(plan, widened, 0, plan.batch * plan.m, want.data());
      EXPECT_EQ(got, want) << (ta ? "ta " : "") << (tb ? "tb" : "");
    }
}

// What the profiler's GFLOP/s and GB/s stand on: 2·M·N·K for the matmul
// (K taken from the transposed side when transpose_a), one per element for
// the epilogue, and only the kernel's own inputs and outputs as bytes.
TEST(MatmulCodegen, KernelCostCountsTheMatmulAndTheBoundaryBytes) {
  Graph g = epilogueGroup("");
  const std::vector<codegen::KernelSpec> kernels = codegen::partitionKernels(g);
  ASSERT_EQ(kernels.size(), 1u);
  const executable::KernelCost cost = executable::kernelCost(g, kernels[0]);
  EXPECT_EQ(cost.matmul_flops, 2.0 * 70 * 48 * 32);
  EXPECT_EQ(cost.flops, cost.matmul_flops + 3.0 * 70 * 48); // bias, scale, cast
  EXPECT_EQ(cost.input_bytes, 2.0 * (70 * 32 + 32 * 48 + 48 + 48));
  EXPECT_EQ(cost.output_bytes, 4.0 * 70 * 48);

  Graph t("ta");
  ValueId a = t.addInput("a", {DType::F32, {16, 5}}, InputRole::Data);
  ValueId b = t.addInput("b", {DType::F32, {16, 7}}, InputRole::Data);
  ops::OpBuilder ob(t);
  t.addOutput("y", ob.create("MatMul", "mm", {a, b}, {{"transpose_a", true}}));
  EXPECT_EQ(executable::nodeFlops(t, t.node(0)), 2.0 * 5 * 7 * 16);
}

} // namespace
} // namespace kiln::testing
