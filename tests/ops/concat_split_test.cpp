// Concat and Split: shape inference (including negative axes and bad attrs),
// kernels against naive indexing, and finite-difference gradient checks.
#include <gtest/gtest.h>

#include "ops/op_registry.h"
#include "tests/support/gradient_check.h"
#include "tests/support/op_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

using Ints = std::vector<int64_t>;

TEST(Concat, InfersJoinedShapeWithNegativeAxis) {
  auto t = inferOp("Concat", {f32({2, 3, 4}), f32({2, 5, 4}), f32({2, 0, 4})}, {{"axis", -2}});
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ((*t)[0], f32({2, 8, 4}));
  t = inferOp("Concat", {f32({2, 3})}, {{"axis", 0}});
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ((*t)[0], f32({2, 3}));
}

TEST(Concat, RejectsMismatchedInputs) {
  auto t = inferOp("Concat", {f32({2, 3}), f32({3, 3})}, {{"axis", 1}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"input 1", "f32[3,3]", "f32[2,3]", "except on axis 1"}));
  t = inferOp("Concat", {f32({2, 3}), f32({2, 3, 1})}, {{"axis", 0}});
  ASSERT_FALSE(t);
  t = inferOp("Concat", {f32({2, 3}), {DType::F16, {2, 3}}}, {{"axis", 0}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"one dtype", "f16[2,3]"}));
  t = inferOp("Concat", {f32({2, 3}), f32({2, 3})}, {{"axis", 2}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"axis 2", "rank 2"}));
  EXPECT_FALSE(inferOp("Concat", {f32({}), f32({})}, {{"axis", 0}}));
  EXPECT_FALSE(inferOp("Concat", {}, {{"axis", 0}}));
}

TEST(Concat, KernelMatchesNaiveIndexing) {
  for (int64_t axis : {0, 1, 2, -1}) {
    const int64_t a = axis < 0 ? axis + 3 : axis;
    std::vector<Tensor> xs;
    std::vector<int64_t> offsets{0};
    for (int64_t i = 0; i < 3; ++i) {
      Shape s{2, 3, 4};
      s[a] = i + 1;
      xs.push_back(randomTensor({DType::BF16, s}, 10 + i));
      offsets.push_back(offsets.back() + s[a]);
    }
    auto y = runOp("Concat", xs, {{"axis", axis}});
    ASSERT_TRUE(y) << y.message();
    const Tensor &out = (*y)[0];
    for (int64_t k = 0; k < out.numElements(); ++k) {
      std::vector<int64_t> i = unflatten(k, out.shape());
      size_t which = 0;
      while (i[a] >= offsets[which + 1])
        ++which;
      i[a] -= offsets[which];
      ASSERT_EQ(out.getFloat(k), xs[which].getFloat(flatten(i, xs[which].shape())))
          << "axis " << axis << " element " << k;
    }
  }
}

TEST(Split, InfersPieces) {
  auto t = inferOp("Split", {{DType::I32, {2, 6}}}, {{"axis", -1}, {"sizes", Ints{1, 0, 5}}});
  ASSERT_TRUE(t) << t.message();
  ASSERT_EQ(t->size(), 3u);
  EXPECT_EQ((*t)[0], (TensorType{DType::I32, {2, 1}}));
  EXPECT_EQ((*t)[1], (TensorType{DType::I32, {2, 0}}));
  EXPECT_EQ((*t)[2], (TensorType{DType::I32, {2, 5}}));
}

TEST(Split, RejectsBadSizes) {
  auto t = inferOp("Split", {f32({2, 6})}, {{"axis", 1}, {"sizes", Ints{2, 3}}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"sizes [2,3]", "sum to 5", "axis 1", "6"}));
  t = inferOp("Split", {f32({2, 6})}, {{"axis", 1}, {"sizes", Ints{7, -1}}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"negative"}));
  t = inferOp("Split", {f32({2, 6})}, {{"axis", 1}, {"sizes", Ints{}}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"sizes is empty"}));
  t = inferOp("Split", {f32({2, 6})}, {{"axis", -3}, {"sizes", Ints{2}}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"axis -3"}));
}

TEST(Split, KernelMatchesNaiveIndexing) {
  const Shape shape{3, 7, 2};
  const Ints sizes{2, 0, 4, 1};
  Tensor x = randomTensor({DType::F16, shape}, 21);
  auto ys = runOp("Split", {x}, {{"axis", -2}, {"sizes", sizes}});
  ASSERT_TRUE(ys) << ys.message();
  ASSERT_EQ(ys->size(), sizes.size());
  int64_t offset = 0;
  for (size_t p = 0; p < sizes.size(); ++p) {
    const Tensor &y = (*ys)[p];
    EXPECT_EQ(y.shape(), (Shape{3, sizes[p], 2}));
    for (int64_t k = 0; k < y.numElements(); ++k) {
      std::vector<int64_t> i = unflatten(k, y.shape());
      i[1] += offset;
      EXPECT_EQ(y.getFloat(k), x.getFloat(flatten(i, shape)));
    }
    offset += sizes[p];
  }
}

TEST(ConcatSplit, SplitThenConcatIsIdentity) {
  Tensor x = Tensor::fromInts(DType::I64, {2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  auto ys = runOp("Split", {x}, {{"axis", 1}, {"sizes", Ints{3, 2}}});
  ASSERT_TRUE(ys) << ys.message();
  auto z = runOp("Concat", *ys, {{"axis", 1}});
  ASSERT_TRUE(z) << z.message();
  EXPECT_EQ((*z)[0], x);
}

TEST(Concat, Gradient) {
  EXPECT_TRUE(checkOpGradient("Concat", {gradInput(f32({3})), gradInput(f32({2}))}, {{"axis", 0}}));
  EXPECT_TRUE(checkOpGradient(
      "Concat", {gradInput(f32({2, 3, 2})), gradInput(f32({2, 1, 2})), gradInput(f32({2, 2, 2}))},
      {{"axis", -2}}));
  EXPECT_TRUE(checkOpGradient("Concat", {gradInput(f32({2, 3}))}, {{"axis", 1}}));
}

TEST(Split, Gradient) {
  EXPECT_TRUE(
      checkOpGradient("Split", {gradInput(f32({5}))}, {{"axis", 0}, {"sizes", Ints{2, 3}}}));
  EXPECT_TRUE(checkOpGradient("Split", {gradInput(f32({2, 6, 2}))},
                              {{"axis", -2}, {"sizes", Ints{1, 3, 2}}}));
  EXPECT_TRUE(
      checkOpGradient("Split", {gradInput(f32({4, 2}))}, {{"axis", 0}, {"sizes", Ints{4}}}));
}

// Outputs without a gradient contribute zeros to the concatenated result.
TEST(Split, GradientWithMissingOutputGradients) {
  Graph g("split_grad");
  ValueId x = g.addInput("x", f32({2, 5}), InputRole::Data);
  ops::OpBuilder b(g);
  auto ys = b.tryCreate("Split", "split", {x}, {{"axis", 1}, {"sizes", Ints{2, 3}}});
  ASSERT_TRUE(ys) << ys.message();
  ValueId d1 = g.addInput("d1", f32({2, 3}), InputRole::Data);
  const Node node = g.node(g.value((*ys)[0]).producer);
  ops::GradContext ctx{b, node, {kNoValue, d1}};
  auto grads = ops::OpRegistry::builtin().find("Split")->impl.grad(ctx);
  ASSERT_TRUE(grads) << grads.message();
  ASSERT_TRUE(b.status()) << b.status().message();
  ASSERT_EQ(grads->size(), 1u);
  ASSERT_EQ(g.type((*grads)[0]), f32({2, 5}));
  g.addOutput("dx", (*grads)[0]);
  Tensor d1_value = randomTensor(f32({2, 3}), 2);
  auto out = ops::interpret(g, {{"x", randomTensor(f32({2, 5}), 1)}, {"d1", d1_value}});
  ASSERT_TRUE(out) << out.message();
  const Tensor &dx = out->at("dx");
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t c = 0; c < 5; ++c)
      EXPECT_EQ(dx.getFloat(r * 5 + c), c < 2 ? 0.0f : d1_value.getFloat(r * 3 + c - 2));

  ops::GradContext none{b, node, {kNoValue, kNoValue}};
  auto no_grads = ops::OpRegistry::builtin().find("Split")->impl.grad(none);
  ASSERT_TRUE(no_grads);
  EXPECT_EQ((*no_grads)[0], kNoValue);
}

} // namespace
} // namespace kiln::testing
