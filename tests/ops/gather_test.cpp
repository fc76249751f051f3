// Gather and EmbeddingGrad: shape inference, row lookup and scatter-add against
// naive loops (with repeated indices), index errors, and Gather's table gradient.
#include <cmath>

#include <gtest/gtest.h>

#include "ops/op_builder.h"
#include "tests/support/gradient_check.h"
#include "tests/support/op_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

TEST(GatherInfer, IndicesShapeThenRowShape) {
  auto t = inferOp("Gather", {{DType::BF16, {10, 4, 3}}, {DType::I64, {2, 5}}});
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ((*t)[0], (TensorType{DType::BF16, {2, 5, 4, 3}}));
  t = inferOp("Gather", {{DType::F32, {10}}, {DType::I32, {}}});
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ((*t)[0], (TensorType{DType::F32, {}}));
}

TEST(GatherInfer, RejectsBadInputs) {
  EXPECT_TRUE(mentions(inferOp("Gather", {{DType::F32, {}}, {DType::I32, {3}}}).message(),
                       {"rank 1", "f32[]"}));
  EXPECT_FALSE(inferOp("Gather", {{DType::F32, {4, 2}}, {DType::F32, {3}}}));
  EXPECT_FALSE(inferOp("Gather", {{DType::I32, {4, 2}}, {DType::I32, {3}}}));
}

TEST(GatherKernel, PicksRowsWithRepeats) {
  for (DType it : {DType::I32, DType::I64}) {
    Tensor table = randomTensor({DType::F16, {5, 2, 3}}, 1);
    Tensor idx = Tensor::fromInts(it, {2, 3}, {4, 0, 4, 1, 1, 3});
    auto y = runOp("Gather", {table, idx});
    ASSERT_TRUE(y) << y.message();
    ASSERT_EQ((*y)[0].type(), (TensorType{DType::F16, {2, 3, 2, 3}}));
    for (int64_t p = 0; p < 6; ++p)
      for (int64_t j = 0; j < 6; ++j)
        EXPECT_EQ((*y)[0].getFloat(p * 6 + j), table.getFloat(idx.getInt(p) * 6 + j));
  }
}

TEST(GatherKernel, OutOfRangeIndexNamesNodeAndIndex) {
  Tensor table = randomTensor({DType::F32, {4, 2}}, 2);
  for (int64_t bad : {4, -1}) {
    auto y = runOp("Gather", {table, Tensor::fromInts(DType::I64, {3}, {0, bad, 1})});
    ASSERT_FALSE(y);
    EXPECT_TRUE(
        mentions(y.message(), {"'op'", "index " + std::to_string(bad), "position 1", "[0, 4)"}));
  }
}

TEST(EmbeddingGradInfer, RowsFromAttribute) {
  auto t = inferOp("EmbeddingGrad", {{DType::F32, {2, 5, 3}}, {DType::I32, {2, 5}}},
                   {{"num_rows", int64_t{7}}});
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ((*t)[0], (TensorType{DType::F32, {7, 3}}));
}

TEST(EmbeddingGradInfer, RejectsBadInputs) {
  EXPECT_TRUE(mentions(inferOp("EmbeddingGrad", {{DType::F32, {2, 4, 3}}, {DType::I32, {2, 5}}},
                               {{"num_rows", int64_t{7}}})
                           .message(),
                       {"f32[2,4,3]", "[2,5]"}));
  EXPECT_TRUE(mentions(inferOp("EmbeddingGrad", {{DType::F32, {2, 3}}, {DType::I32, {2}}},
                               {{"num_rows", int64_t{0}}})
                           .message(),
                       {"num_rows"}));
  EXPECT_FALSE(inferOp("EmbeddingGrad", {{DType::F32, {2, 3}}, {DType::I32, {2}}}));
}

TEST(EmbeddingGradKernel, ScatterAddsRepeatedIndices) {
  Tensor dy = randomTensor({DType::F32, {6, 3}}, 3);
  Tensor idx = Tensor::fromInts(DType::I64, {6}, {2, 0, 2, 2, 4, 0});
  auto d = runOp("EmbeddingGrad", {dy, idx}, {{"num_rows", int64_t{5}}});
  ASSERT_TRUE(d) << d.message();
  for (int64_t r = 0; r < 5; ++r)
    for (int64_t j = 0; j < 3; ++j) {
      double want = 0;
      for (int64_t p = 0; p < 6; ++p)
        if (idx.getInt(p) == r)
          want += dy.getFloat(p * 3 + j);
      EXPECT_NEAR((*d)[0].getFloat(r * 3 + j), want, 1e-6) << r << "," << j;
    }
}

// Sums are exact in double and rounded once: 1 + 2^-11 + 2^-11 is 1 + 2^-10 in
// f16, whereas adding in f16 would tie back to 1 at each step.
TEST(EmbeddingGradKernel, F16SumRoundsOnce) {
  const float u = std::ldexp(1.0f, -11);
  Tensor dy = Tensor::fromFloats(DType::F16, {3, 1}, {1, u, u});
  auto d = runOp("EmbeddingGrad", {dy, Tensor::fromInts(DType::I32, {3}, {1, 1, 1})},
                 {{"num_rows", int64_t{2}}});
  ASSERT_TRUE(d) << d.message();
  EXPECT_EQ((*d)[0].getFloat(0), 0.0f);
  EXPECT_EQ((*d)[0].getFloat(1), 1.0f + 2 * u);
}

TEST(EmbeddingGradKernel, OverflowFollowsTheMode) {
  Tensor dy = Tensor::fromFloats(DType::F16, {2, 1}, {60000, 60000});
  Tensor idx = Tensor::fromInts(DType::I32, {2}, {0, 0});
  auto inf = runOp("EmbeddingGrad", {dy, idx}, {{"num_rows", int64_t{1}}}, OverflowMode::InfNan);
  ASSERT_TRUE(inf);
  EXPECT_TRUE(std::isinf((*inf)[0].getFloat(0)));
  auto sat =
      runOp("EmbeddingGrad", {dy, idx}, {{"num_rows", int64_t{1}}}, OverflowMode::Saturation);
  ASSERT_TRUE(sat);
  EXPECT_EQ((*sat)[0].getFloat(0), 65504.0f);
}

TEST(EmbeddingGradKernel, OutOfRangeIndexIsAnError) {
  auto d = runOp("EmbeddingGrad",
                 {randomTensor({DType::F32, {2, 3}}, 4), Tensor::fromInts(DType::I32, {2}, {1, 3})},
                 {{"num_rows", int64_t{3}}});
  ASSERT_FALSE(d);
  EXPECT_TRUE(mentions(d.message(), {"index 3", "[0, 3)"}));
}

TEST(GatherGrad, FiniteDifferenceInTheTable) {
  struct Case {
    Shape table;
    Tensor indices;
  };
  const Case cases[] = {
      {{5, 3}, Tensor::fromInts(DType::I64, {4}, {1, 4, 1, 0})},
      {{4, 2, 2}, Tensor::fromInts(DType::I32, {2, 3}, {3, 3, 0, 2, 3, 1})},
      {{6}, Tensor::fromInts(DType::I32, {}, {5})},
  };
  for (const Case &c : cases) {
    EXPECT_TRUE(
        checkOpGradient("Gather", {gradInput({DType::F32, c.table}), fixedInput(c.indices)}))
        << shapeToString(c.table);
  }
}

TEST(GatherGrad, IndicesGetNoGradient) {
  Graph g("g");
  ValueId table = g.addInput("table", {DType::BF16, {5, 3}}, InputRole::Parameter);
  ValueId idx = g.addInput("idx", {DType::I32, {4}}, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId y = b.create("Gather", "y", {table, idx});
  ValueId dy = g.addInput("dy", g.type(y), InputRole::Data);
  ops::GradContext ctx{b, g.node(g.value(y).producer), {dy}};
  auto grads = ops::OpRegistry::builtin().find("Gather")->impl.grad(ctx);
  ASSERT_TRUE(grads) << grads.message();
  EXPECT_EQ(g.type((*grads)[0]), g.type(table));
  EXPECT_EQ((*grads)[1], kNoValue);
  EXPECT_EQ(g.node(g.value((*grads)[0]).producer).op, "EmbeddingGrad");
}

} // namespace
} // namespace kiln::testing
