// Index-set splitting of a row's innermost loop (kernel_expr.h's
// wrapSplits, rangedRem and rangedPick; the emitter's ranges): RotateHalf's
// (j + d/2) mod d read becomes an affine read in each half, so the rotary
// kernels load their rows by vectors instead of gathering them, with the
// same results.
#include <gtest/gtest.h>

#include "compiler/codegen/kernel_builder.h"
#include "compiler/codegen/kernel_compiler.h"
#include "compiler/codegen/object_compiler.h"
#include "ops/op_builder.h"
#include "passes/fusion/rules/rule_loader.h"
#include "target/target.h"
#include "tests/support/codegen_test_util.h"
#include "tests/support/pass_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

using namespace codegen;

TEST(WrapRanges, ARotatedIndexSplitsTheRowWhereItWraps) {
  // (j + 32) mod 64, and the pick by j < 32 beside it.
  const ExprRef wrapped = binary(BinaryOp::Rem, var(2) + iconst(32), iconst(64));
  const ExprRef pick = select(binary(BinaryOp::Lt, var(2), iconst(32)), fconst(1), fconst(2));
  EXPECT_EQ(wrapSplits({{wrapped, 2, 64}, {pick, 2, 64}}, 64), std::vector<int64_t>{32});
  // A pick alone, or an index on another axis or extent, splits nothing.
  EXPECT_TRUE(wrapSplits({{pick, 2, 64}}, 64).empty());
  EXPECT_TRUE(wrapSplits({{wrapped, 1, 64}}, 64).empty());
  EXPECT_TRUE(wrapSplits({{wrapped, 2, 64}}, 128).empty());
  // Decided within a range, not across the wrap.
  EXPECT_EQ(rangedRem(*wrapped, 2, 0, 32), 0);
  EXPECT_EQ(rangedRem(*wrapped, 2, 32, 64), 64);
  EXPECT_EQ(rangedRem(*wrapped, 2, 16, 48), std::nullopt);
  const Expr &cond = *pick->operands[0];
  EXPECT_EQ(rangedPick(cond, 2, 0, 32), true);
  EXPECT_EQ(rangedPick(cond, 2, 32, 64), false);
  EXPECT_EQ(rangedPick(cond, 2, 16, 48), std::nullopt);
  EXPECT_EQ(rangedPick(cond, 1, 0, 32), std::nullopt) << "another axis";
}

// The rotary embedding x cos + rotate_half(x) sin as the model writes it
// (x [B, S, N, D] in BSND, the tables [1, S, 1, D]), fused into its kernel.
Graph rotaryGraph(DType dtype, int64_t seq, int64_t dim) {
  Graph g("rotary");
  const ValueId x = g.addInput("x", {dtype, {2, seq, 4, dim}}, InputRole::Data);
  const ValueId cos = g.addInput("cos", {dtype, {1, seq, 1, dim}}, InputRole::Data);
  const ValueId sin = g.addInput("sin", {dtype, {1, seq, 1, dim}}, InputRole::Data);
  ops::OpBuilder b(g);
  const ValueId rotated = b.create("Mul", "mul_sin", {b.create("RotateHalf", "rotate", {x}), sin});
  g.addOutput("y", b.create("Add", "add", {b.create("Mul", "mul_cos", {x, cos}), rotated}));
  auto registry = passes::rules::registryWithFusionRules(passes::PassRegistry::builtin());
  EXPECT_TRUE(registry.isOk()) << registry.message();
  runPasses(g, onlyFusionPass("ascend910b", "RotaryFusionRule", *registry), *registry);
  return g;
}

TEST(WrapRanges, TheRotaryKernelReadsItsRowsWithoutGathers) {
  for (DType d : {DType::F32, DType::BF16}) {
    const Graph g = rotaryGraph(d, 16, 64);
    expectCompiledMatchesReference(g, randomInputs(g, 7));
    auto target = target::loadTarget("ascend910b");
    ASSERT_TRUE(target.isOk());
    auto kernels = compileKernels(g, *target, {});
    ASSERT_TRUE(kernels.isOk()) << kernels.message();
    ASSERT_EQ(kernels->kernels.size(), 1u) << "one rotary kernel";
    auto build = buildKernel(g, kernels->kernels[0].spec);
    ASSERT_TRUE(build.isOk()) << build.message();
    std::string ir;
    ASSERT_TRUE(compileKernelObject(build->program, "rotary", {}, &ir).isOk());
    EXPECT_EQ(ir.find("gather"), std::string::npos) << dtypeName(d) << ":\n" << ir;
  }
}

TEST(WrapRanges, OddHalvesAndShortRowsKeepTheirResults) {
  for (DType d : {DType::F32, DType::F16, DType::BF16})
    for (int64_t dim : {2, 6, 130}) {
      const Graph g = rotaryGraph(d, 5, dim);
      expectCompiledMatchesReference(g, randomInputs(g, 11));
    }
}

} // namespace
} // namespace kiln::testing
