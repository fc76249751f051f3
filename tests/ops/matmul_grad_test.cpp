// The gradients of MatMul and BatchMatMul against finite differences, for
// every transpose flag, with biases and fp32_out, and the graph the rule
// builds (flagged matmuls only, no Transpose nodes).
#include <gtest/gtest.h>

#include "ops/op_builder.h"
#include "ops/op_registry.h"
#include "tests/ops/matmul_test_util.h"
#include "tests/support/gradient_check.h"
#include "tests/support/op_test_util.h"

namespace kiln::testing {
namespace {

// --- gradients ---------------------------------------------------------------

TEST(MatMulGrad, FiniteDifferenceAllFlagCombinations) {
  for (Flags f : kAllFlags)
    for (auto [m, k, n] : {std::tuple{2, 3, 4}, std::tuple{5, 1, 3}, std::tuple{1, 6, 1}}) {
      EXPECT_TRUE(checkOpGradient("MatMul",
                                  {gradInput({DType::F32, stored({}, m, k, f.ta)}),
                                   gradInput({DType::F32, stored({}, k, n, f.tb)})},
                                  flagAttrs(f)))
          << f.ta << f.tb << " m=" << m << " k=" << k << " n=" << n;
    }
}

TEST(MatMulGrad, FiniteDifferenceWithBias) {
  for (Flags f : kAllFlags)
    EXPECT_TRUE(checkOpGradient("MatMul",
                                {gradInput({DType::F32, stored({}, 3, 4, f.ta)}),
                                 gradInput({DType::F32, stored({}, 4, 2, f.tb)}),
                                 gradInput({DType::F32, {2}})},
                                flagAttrs(f)))
        << f.ta << f.tb;
}

// An f16 bias of an f32 matmul gets its gradient cast back to f16. The bias
// holds multiples of 1/4 so that the +-1/8 probes are exact in f16.
TEST(MatMulGrad, FiniteDifferenceWithBiasOfAnotherDType) {
  GradCheckInput bias = gradInput({DType::F16, {3}});
  bias.value = Tensor::fromFloats(DType::F16, {3}, {0.25f, -0.5f, 1.0f});
  GradCheckOptions options;
  options.eps = 0.125;
  EXPECT_TRUE(checkOpGradient(
      "MatMul", {gradInput({DType::F32, {2, 4}}), gradInput({DType::F32, {4, 3}}), bias}, {},
      options));
}

TEST(BatchMatMulGrad, FiniteDifferenceAllFlagCombinations) {
  for (Flags f : kAllFlags) {
    EXPECT_TRUE(checkOpGradient("BatchMatMul",
                                {gradInput({DType::F32, stored({2}, 3, 4, f.ta)}),
                                 gradInput({DType::F32, stored({2}, 4, 2, f.tb)})},
                                flagAttrs(f)))
        << f.ta << f.tb;
    EXPECT_TRUE(checkOpGradient("BatchMatMul",
                                {gradInput({DType::F32, stored({2, 2}, 2, 3, f.ta)}),
                                 gradInput({DType::F32, stored({2, 2}, 3, 2, f.tb)})},
                                flagAttrs(f)))
        << f.ta << f.tb;
  }
}

// The rule builds matmuls with flags only: no Transpose nodes, types of the inputs.
TEST(MatMulGrad, UsesOnlyFlaggedMatMuls) {
  for (const char *op : {"MatMul", "BatchMatMul"})
    for (Flags f : kAllFlags) {
      const bool batched = std::string(op) == "BatchMatMul";
      const Shape batch = batched ? Shape{2} : Shape{};
      Graph g("g");
      ValueId a = g.addInput("a", {DType::F16, stored(batch, 3, 4, f.ta)}, InputRole::Data);
      ValueId b = g.addInput("b", {DType::F16, stored(batch, 4, 5, f.tb)}, InputRole::Data);
      ops::OpBuilder builder(g);
      ValueId c = builder.create(op, "c", {a, b}, flagAttrs(f));
      Shape cs = batch;
      cs.insert(cs.end(), {3, 5});
      ValueId dc = g.addInput("dc", {DType::F16, cs}, InputRole::Data);
      const size_t before = g.numNodes();
      const Node node = g.node(g.value(c).producer); // copy: the graph grows below
      ops::GradContext ctx{builder, node, {dc}};
      auto grads = ops::OpRegistry::builtin().find(op)->impl.grad(ctx);
      ASSERT_TRUE(grads) << grads.message();
      EXPECT_EQ(g.type((*grads)[0]), g.type(a));
      EXPECT_EQ(g.type((*grads)[1]), g.type(b));
      for (size_t i = before; i < g.numNodes(); ++i)
        EXPECT_EQ(g.node(static_cast<NodeId>(i)).op, op);
    }
}

// fp32_out on 16-bit operands: the f32 cotangent is cast to the operands' dtype
// before the gradient matmuls. The operands and biases lie on a 1/8 grid and
// the probes are +-1/8, so every perturbed input is exact in f16 and bf16.
TEST(MatMulGrad, FiniteDifferenceWithFp32Out) {
  GradCheckOptions options;
  options.eps = 0.125;
  for (DType dt : {DType::F16, DType::BF16})
    for (Flags f : kAllFlags) {
      EXPECT_TRUE(checkOpGradient("MatMul",
                                  {gridInput({dt, stored({}, 3, 4, f.ta)}, 71),
                                   gridInput({dt, stored({}, 4, 5, f.tb)}, 72)},
                                  fp32OutAttrs(f), options))
          << dtypeName(dt) << " " << f.ta << f.tb;
      for (DType bias_dt : {dt, DType::F32})
        EXPECT_TRUE(checkOpGradient("MatMul",
                                    {gridInput({dt, stored({}, 3, 4, f.ta)}, 73),
                                     gridInput({dt, stored({}, 4, 2, f.tb)}, 74),
                                     gridInput({bias_dt, {2}}, 75)},
                                    fp32OutAttrs(f), options))
            << dtypeName(dt) << " bias " << dtypeName(bias_dt) << " " << f.ta << f.tb;
      EXPECT_TRUE(checkOpGradient("BatchMatMul",
                                  {gridInput({dt, stored({2}, 3, 4, f.ta)}, 76),
                                   gridInput({dt, stored({2}, 4, 2, f.tb)}, 77)},
                                  fp32OutAttrs(f), options))
          << dtypeName(dt) << " " << f.ta << f.tb;
    }
  // f32 operands: fp32_out is a no-op and so is its gradient.
  EXPECT_TRUE(checkOpGradient("MatMul",
                              {gradInput({DType::F32, {3, 4}}), gradInput({DType::F32, {4, 2}})},
                              fp32OutAttrs()));
}

// With fp32_out the gradients keep the operands' (and the bias's) dtypes: one
// Cast of dC to f16 feeds 16-bit gradient matmuls without fp32_out, and the
// bias gradient sums the f32 dC itself.
TEST(MatMulGrad, Fp32OutGradientDTypes) {
  for (const char *op : {"MatMul", "BatchMatMul"})
    for (DType bias_dt : {DType::F16, DType::F32}) {
      const bool batched = std::string(op) == "BatchMatMul";
      const Shape batch = batched ? Shape{2} : Shape{};
      Graph g("g");
      ValueId a = g.addInput("a", {DType::F16, stored(batch, 3, 4, false)}, InputRole::Data);
      ValueId b = g.addInput("b", {DType::F16, stored(batch, 4, 5, false)}, InputRole::Data);
      std::vector<ValueId> args = {a, b};
      ValueId bias = kNoValue;
      if (!batched) {
        bias = g.addInput("bias", {bias_dt, {5}}, InputRole::Data);
        args.push_back(bias);
      }
      ops::OpBuilder builder(g);
      ValueId c = builder.create(op, "c", args, fp32OutAttrs());
      ASSERT_EQ(g.type(c).dtype, DType::F32);
      ValueId dc = g.addInput("dc", g.type(c), InputRole::Data);
      const size_t before = g.numNodes();
      const Node node = g.node(g.value(c).producer); // copy: the graph grows below
      ops::GradContext ctx{builder, node, {dc}};
      auto grads = ops::OpRegistry::builtin().find(op)->impl.grad(ctx);
      ASSERT_TRUE(grads) << grads.message();
      EXPECT_EQ(g.type((*grads)[0]), g.type(a)) << op;
      EXPECT_EQ(g.type((*grads)[1]), g.type(b)) << op;
      if (!batched) {
        EXPECT_EQ(g.type((*grads)[2]), g.type(bias)) << dtypeName(bias_dt);
      }
      int casts_of_dc = 0, matmuls = 0;
      for (size_t i = before; i < g.numNodes(); ++i) {
        const Node &n = g.node(static_cast<NodeId>(i));
        if (n.op == op) {
          ++matmuls;
          EXPECT_FALSE(n.attrs.getBool("fp32_out"));
          for (ValueId in : n.inputs)
            EXPECT_EQ(g.type(in).dtype, DType::F16) << n.name;
        } else if (n.op == "Cast" && n.inputs[0] == dc) {
          ++casts_of_dc;
          EXPECT_EQ(n.attrs.getDType("dtype"), DType::F16);
        } else if (n.op == "SumToShape") {
          EXPECT_EQ(n.inputs[0], dc) << "the bias gradient reads the f32 dC";
        }
      }
      EXPECT_EQ(matmuls, 2) << op;
      EXPECT_EQ(casts_of_dc, 1) << op;
    }
}

TEST(MatMulGrad, NoOutputGradientGivesNone) {
  Graph g("g");
  ValueId a = g.addInput("a", {DType::F32, {2, 3}}, InputRole::Data);
  ValueId b = g.addInput("b", {DType::F32, {3, 4}}, InputRole::Data);
  ops::OpBuilder builder(g);
  ValueId c = builder.create("MatMul", "c", {a, b});
  ops::GradContext ctx{builder, g.node(g.value(c).producer), {kNoValue}};
  auto grads = ops::OpRegistry::builtin().find("MatMul")->impl.grad(ctx);
  ASSERT_TRUE(grads);
  EXPECT_EQ(*grads, (std::vector<ValueId>{kNoValue, kNoValue}));
}

} // namespace
} // namespace kiln::testing
