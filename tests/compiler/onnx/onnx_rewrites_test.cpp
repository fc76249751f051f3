// What the import rewrites so kiln's fusions see their patterns (docs/onnx.md):
// torch's silu (x * sigmoid(x)) becomes Silu and its rotate_half
// (concat(-x[..., h:], x[..., :h])) RotateHalf, each giving the values the
// ops it stands for give; near misses stay as they are.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "tests/compiler/onnx/onnx_test_model.h"
#include "tests/support/random.h"

namespace kiln::frontend::onnx_import {
namespace {

using testing::OnnxTestModel;
constexpr int32_t kFloat = onnx::TensorProto::FLOAT;

int64_t count(const Graph &g, const std::string &op) {
  int64_t n = 0;
  for (const Node &node : g.nodes())
    n += node.op == op;
  return n;
}

// y = x * sigmoid(z), the product written either way round.
OnnxTestModel siluModel(bool sigmoid_first, bool same_input) {
  OnnxTestModel m(13);
  m.input("x", kFloat, {2, 5});
  m.input("z", kFloat, {2, 5});
  m.node("Sigmoid", {same_input ? "x" : "z"}, {"s"});
  m.node("Mul",
         sigmoid_first ? std::vector<std::string>{"s", "x"} : std::vector<std::string>{"x", "s"},
         {"y"});
  m.output("y");
  return m;
}

TEST(OnnxRewrites, XTimesItsSigmoidIsSilu) {
  ops::TensorMap in{{"x", testing::randomTensor({DType::F32, {2, 5}}, 3)},
                    {"z", testing::randomTensor({DType::F32, {2, 5}}, 4)}};
  for (bool same : {true, false})
    for (bool sigmoid_first : {true, false}) {
      const OnnxTestModel m = siluModel(sigmoid_first, same);
      auto imported = m.import();
      ASSERT_TRUE(imported.isOk()) << imported.message();
      EXPECT_EQ(count(imported->graph, "Silu"), same ? 1 : 0) << sigmoid_first;
      auto out = m.run(in);
      ASSERT_TRUE(out.isOk()) << out.message();
      const Tensor &x = in.at("x"), &z = in.at(same ? "x" : "z");
      const Tensor &y = out->at("y");
      for (int64_t k = 0; k < x.numElements(); ++k)
        EXPECT_NEAR(y.getFloat(k), x.getFloat(k) / (1 + std::exp(-z.getFloat(k))), 1e-6) << k;
    }
}

// y = concat(-x[..., a:b], x[..., c:d]) along the last axis of x [2, 3, 8].
OnnxTestModel concatModel(std::array<int64_t, 4> bounds) {
  OnnxTestModel m(13);
  m.input("x", kFloat, {2, 3, 8});
  m.ints("axes", {-1});
  m.ints("a", {bounds[0]});
  m.ints("b", {bounds[1]});
  m.ints("c", {bounds[2]});
  m.ints("d", {bounds[3]});
  m.node("Slice", {"x", "a", "b", "axes"}, {"second"});
  m.node("Neg", {"second"}, {"negated"});
  m.node("Slice", {"x", "c", "d", "axes"}, {"first"});
  OnnxTestModel::attr(m.node("Concat", {"negated", "first"}, {"y"}), "axis", int64_t{-1});
  m.output("y");
  return m;
}

TEST(OnnxRewrites, TorchsRotateHalfIsRotateHalf) {
  const ops::TensorMap in{{"x", testing::randomTensor({DType::F32, {2, 3, 8}}, 5)}};
  // rotate_half, then the halves swapped, and a split that is not halves.
  for (const auto &[bounds, rotates] : std::vector<std::pair<std::array<int64_t, 4>, bool>>{
           {{4, 8, 0, 4}, true}, {{0, 4, 4, 8}, false}, {{3, 8, 0, 3}, false}}) {
    const OnnxTestModel m = concatModel(bounds);
    auto imported = m.import();
    ASSERT_TRUE(imported.isOk()) << imported.message();
    EXPECT_EQ(count(imported->graph, "RotateHalf"), rotates ? 1 : 0) << bounds[0];
    auto out = m.run(in);
    ASSERT_TRUE(out.isOk()) << out.message();
    const Tensor &x = in.at("x"), &y = out->at("y");
    const int64_t width = bounds[1] - bounds[0];
    for (int64_t row = 0; row < 6; ++row)
      for (int64_t j = 0; j < 8; ++j) {
        const float want = j < width ? -x.getFloat(row * 8 + bounds[0] + j)
                                     : x.getFloat(row * 8 + bounds[2] + j - width);
        EXPECT_EQ(y.getFloat(row * 8 + j), want) << bounds[0] << " " << row << " " << j;
      }
  }
}

} // namespace
} // namespace kiln::frontend::onnx_import
