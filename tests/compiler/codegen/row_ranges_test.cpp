// Index-set splitting of a row's innermost loop (kernel_expr.h's
// rangeSplits, rangedRem and rangedPick; the emitter's
// ranges): RotateHalf's (j + d/2) mod d read becomes an affine read in each
// half, and Concat's and Pad's clamped reads affine reads of each input's
// range, so the kernels load their rows by vectors instead of gathering
// them, with the same results.
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

TEST(RowRanges, ARotatedIndexSplitsTheRowWhereItWraps) {
  // (j + 32) mod 64, and the pick by j < 32 beside it.
  const ExprRef wrapped = binary(BinaryOp::Rem, var(2) + iconst(32), iconst(64));
  const ExprRef pick = select(binary(BinaryOp::Lt, var(2), iconst(32)), fconst(1), fconst(2));
  EXPECT_EQ(rangeSplits({{wrapped, 2, 64}, {pick, 2, 64}}, 64), std::vector<int64_t>{32});
  EXPECT_EQ(rangeSplits({{pick, 2, 64}}, 64), std::vector<int64_t>{32}) << "a pick alone";
  // An index on another axis or extent splits nothing.
  EXPECT_TRUE(rangeSplits({{wrapped, 1, 64}}, 64).empty());
  EXPECT_TRUE(rangeSplits({{wrapped, 2, 64}}, 128).empty());
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

ExprRef in(int buffer, ExprRef index) {
  return load(buffer, ScalarType::F32, {var(0), std::move(index)});
}
ExprRef below(int64_t c) { return binary(BinaryOp::Lt, var(1), iconst(c)); }
ExprRef clamped(int64_t offset, int64_t size) {
  return binary(BinaryOp::Min, binary(BinaryOp::Max, var(1) + iconst(-offset), iconst(0)),
                iconst(size - 1));
}

TEST(RowRanges, AConcatChainSplitsAtItsOffsetsAndEachRangeReadsOneInput) {
  // Concat of widths 3, 4 and 3 along axis 1, as lowerConcat writes it.
  const ExprRef body = round(select(below(3), in(0, clamped(0, 3)),
                                    select(below(7), in(1, clamped(3, 4)), in(2, clamped(7, 3)))),
                             DType::BF16);
  EXPECT_EQ(rangeSplits({{body, 1, 10}}, 10), (std::vector<int64_t>{3, 7}));
  // Splits past the extent, or at its ends, are dropped.
  EXPECT_EQ(rangeSplits(
                {{select(below(0), in(0, var(1)), select(below(12), in(1, var(1)), in(2, var(1)))),
                  1, 10}},
                10),
            std::vector<int64_t>{});
  EXPECT_EQ(rangedPick(*below(3), 1, 0, 3), true);
  EXPECT_EQ(rangedPick(*below(7), 1, 3, 7), true);
  EXPECT_EQ(rangedPick(*below(3), 1, 3, 7), false);
}

TEST(RowRanges, PadsBoundsAreDecidedInEachRange) {
  // Inside the input where 2 <= j < 6.
  const ExprRef from = binary(BinaryOp::Ge, var(1), iconst(2));
  const ExprRef to = binary(BinaryOp::Lt, var(1), iconst(6));
  const ExprRef body = select(binary(BinaryOp::And, from, to), in(0, clamped(2, 4)), fconst(0));
  EXPECT_EQ(rangeSplits({{body, 1, 9}}, 9), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(rangedPick(*from, 1, 0, 2), false);
  EXPECT_EQ(rangedPick(*from, 1, 2, 6), true);
  EXPECT_EQ(rangedPick(*to, 1, 2, 6), true);
  EXPECT_EQ(rangedPick(*to, 1, 6, 9), false);
  EXPECT_EQ(rangedPick(*from, 1, 1, 3), std::nullopt);
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

TEST(RowRanges, TheRotaryKernelReadsItsRowsWithoutGathers) {
  for (DType d : {DType::F32, DType::BF16}) {
    const Graph g = rotaryGraph(d, 16, 64);
    expectCompiledMatchesReference(g, randomInputs(g, 7));
    const std::string ir = kernelIr(g);
    EXPECT_EQ(ir.find("gather"), std::string::npos) << dtypeName(d) << ":\n" << ir;
  }
}

TEST(RowRanges, OddHalvesAndShortRowsKeepTheirResults) {
  for (DType d : {DType::F32, DType::F16, DType::BF16})
    for (int64_t dim : {2, 6, 130}) {
      const Graph g = rotaryGraph(d, 5, dim);
      expectCompiledMatchesReference(g, randomInputs(g, 11));
    }
}

// One node of `op` on inputs of `shapes` in `dtype`.
Graph oneNode(const std::string &op, DType dtype, const std::vector<Shape> &shapes,
              const AttrMap &attrs) {
  Graph g(op);
  std::vector<ValueId> inputs;
  for (size_t i = 0; i < shapes.size(); ++i)
    inputs.push_back(g.addInput("x" + std::to_string(i), {dtype, shapes[i]}, InputRole::Data));
  ops::OpBuilder b(g);
  g.addOutput("y", b.create(op, "node", inputs, attrs));
  return g;
}

TEST(RowRanges, ConcatAndPadReadTheirRowsWithoutGathers) {
  for (DType d : {DType::F32, DType::BF16}) {
    // The backward's dq, dk and dv joined along the last axis.
    const Graph concat = oneNode("Concat", d, {{4, 8, 64}, {4, 8, 64}, {4, 8, 64}}, {{"axis", -1}});
    expectCompiledMatchesReference(concat, randomInputs(concat, 3));
    std::string ir = kernelIr(concat);
    EXPECT_EQ(ir.find("gather"), std::string::npos) << dtypeName(d) << " Concat:\n" << ir;
    const Graph pad =
        oneNode("Pad", d, {{4, 8, 64}},
                {{"before", Shape{0, 0, 16}}, {"after", Shape{0, 1, 48}}, {"value", 0.5}});
    expectCompiledMatchesReference(pad, randomInputs(pad, 5));
    ir = kernelIr(pad);
    EXPECT_EQ(ir.find("gather"), std::string::npos) << dtypeName(d) << " Pad:\n" << ir;
  }
}

} // namespace
} // namespace kiln::testing
