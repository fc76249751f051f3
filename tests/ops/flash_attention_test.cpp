// FlashAttentionScore and its gradient against the unfused attention the
// frontend builds (BatchMatMul, Div, CausalMask, Softmax, BatchMatMul, with
// grouped-query reshapes), on the reference interpreter: equal within 1e-5
// in f32 for multi-head and grouped-query attention and a sequence of odd
// length; in f16 the fused op keeps the scores in f32, so it stays finite
// where the unfused one overflows.
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "compiler/autodiff/autodiff.h"
#include "ops/interpreter.h"
#include "ops/op_builder.h"
#include "tests/support/op_test_util.h"
#include "tests/support/random.h"

namespace kiln::ops {
namespace {

using testing::inferOp;

struct Case {
  int64_t B, N, Nkv, S, D;
};

// Outputs "out" and "dq", "dk", "dv": the gradients of loss = sum(out_f32 * w)
// in the inputs.
void addWeightedLoss(Graph &g, OpBuilder &b, ValueId out, ValueId out_f32, ValueId w,
                     const std::vector<ValueId> &inputs) {
  ValueId loss = b.create("ReduceSum", "loss", {b.create("Mul", "weighted", {out_f32, w})},
                          {{"axes", std::vector<int64_t>{0, 1, 2, 3}}, {"keepdims", false}});
  auto grads = autodiff::gradients(b, loss, inputs);
  EXPECT_TRUE(grads.isOk()) << grads.message();
  g.addOutput("out", out);
  if (grads) {
    g.addOutput("dq", (*grads)[0]);
    g.addOutput("dk", (*grads)[1]);
    g.addOutput("dv", (*grads)[2]);
  }
}

// loss = sum(attention(q, k, v) * w), fused or as the frontend writes it,
// with d loss / d q, k, v as outputs "dq", "dk", "dv" and the attention as "out".
Graph attentionGraph(const Case &c, DType dt, bool fused) {
  Graph g("attention");
  const TensorType qt{dt, {c.B, c.N, c.S, c.D}}, kt{dt, {c.B, c.Nkv, c.S, c.D}};
  ValueId q = g.addInput("q", qt, InputRole::Data);
  ValueId k = g.addInput("k", kt, InputRole::Data);
  ValueId v = g.addInput("v", kt, InputRole::Data);
  ValueId w = g.addInput("w", TensorType{DType::F32, qt.shape}, InputRole::Data);
  OpBuilder b(g);
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.D));
  ValueId out;
  if (fused) {
    out = b.createMulti("FlashAttentionScore", "fa", {q, k, v}, {{"scale", scale}})[0];
  } else {
    const int64_t group = c.N / c.Nkv;
    auto reshape = [&](ValueId x, Shape s, const char *name) {
      return group == 1 ? x : b.create("Reshape", name, {x}, {{"shape", std::move(s)}});
    };
    ValueId qg = reshape(q, {c.B, c.Nkv, group * c.S, c.D}, "q_groups");
    ValueId s = b.create("BatchMatMul", "scores", {qg, k}, {{"transpose_b", true}});
    s = reshape(s, {c.B, c.N, c.S, c.S}, "scores_heads");
    s = b.create("Div", "scale", {s, b.constant(std::sqrt(static_cast<double>(c.D)), dt, "d")});
    s = b.create("CausalMask", "mask", {s}, {{"fill", lowestFinite(dt)}});
    s = b.create("Cast", "to_f32", {s}, {{"dtype", DType::F32}});
    ValueId p = b.create("Softmax", "softmax", {s}, {{"axis", int64_t{3}}});
    p = b.create("Cast", "to_dtype", {p}, {{"dtype", dt}});
    p = reshape(p, {c.B, c.Nkv, group * c.S, c.S}, "probs_groups");
    out = b.create("BatchMatMul", "context", {p, v});
    out = reshape(out, {c.B, c.N, c.S, c.D}, "context_heads");
  }
  addWeightedLoss(g, b, out, b.create("Cast", "out_f32", {out}, {{"dtype", DType::F32}}), w,
                  {q, k, v});
  return g;
}

// q and k uniform in [lo, hi], v and w in [-1, 1].
TensorMap run(const Graph &g, const Case &c, DType dt, float lo = -1.0f, float hi = 1.0f) {
  TensorMap feed;
  feed["q"] = testing::randomTensor(TensorType{dt, {c.B, c.N, c.S, c.D}}, 1, lo, hi);
  feed["k"] = testing::randomTensor(TensorType{dt, {c.B, c.Nkv, c.S, c.D}}, 2, lo, hi);
  feed["v"] = testing::randomTensor(TensorType{dt, {c.B, c.Nkv, c.S, c.D}}, 3);
  feed["w"] = testing::randomTensor(TensorType{DType::F32, {c.B, c.N, c.S, c.D}}, 4);
  auto out = interpret(g, feed);
  EXPECT_TRUE(out.isOk()) << out.message();
  return out.isOk() ? *out : TensorMap{};
}

class FlashAttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(FlashAttentionTest, EqualsTheUnfusedAttentionAndItsGradientsInF32) {
  const Case c = GetParam();
  const TensorMap fused = run(attentionGraph(c, DType::F32, true), c, DType::F32);
  const TensorMap plain = run(attentionGraph(c, DType::F32, false), c, DType::F32);
  for (const char *name : {"out", "dq", "dk", "dv"}) {
    const Tensor &a = fused.at(name), &b = plain.at(name);
    ASSERT_EQ(a.type(), b.type()) << name;
    double max_err = 0, max_abs = 0;
    for (int64_t i = 0; i < a.numElements(); ++i) {
      max_err = std::max(max_err, std::abs(static_cast<double>(a.getFloat(i)) - b.getFloat(i)));
      max_abs = std::max(max_abs, std::abs(static_cast<double>(b.getFloat(i))));
    }
    EXPECT_GT(max_abs, 1e-2) << name;
    EXPECT_LE(max_err, 1e-5 * max_abs) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, FlashAttentionTest,
                         ::testing::Values(Case{2, 2, 2, 7, 8},   // multi-head, odd sequence
                                           Case{1, 4, 2, 9, 16},  // two queries per key/value head
                                           Case{2, 6, 1, 5, 4})); // one key/value head for all

TEST(FlashAttention, F16FollowsTheUnfusedNumericsAndKeepsScoresInF32) {
  const Case c{1, 2, 1, 6, 8};
  const TensorMap fused = run(attentionGraph(c, DType::F16, true), c, DType::F16);
  const TensorMap plain = run(attentionGraph(c, DType::F16, false), c, DType::F16);
  const Tensor &a = fused.at("out"), &b = plain.at("out");
  ASSERT_EQ(a.dtype(), DType::F16);
  for (int64_t i = 0; i < a.numElements(); ++i)
    EXPECT_NEAR(a.getFloat(i), b.getFloat(i), 4e-3) << i; // a few f16 ulps
  // q k^T past f16's 65504 (8 products of at least 100 x 100): the unfused
  // attention overflows, the fused one computes the scores in f32.
  const TensorMap big = run(attentionGraph(c, DType::F16, true), c, DType::F16, 100.0f, 120.0f);
  const TensorMap big_plain =
      run(attentionGraph(c, DType::F16, false), c, DType::F16, 100.0f, 120.0f);
  bool plain_finite = true;
  for (int64_t i = 0; i < big_plain.at("out").numElements(); ++i)
    plain_finite = plain_finite && std::isfinite(big_plain.at("out").getFloat(i));
  EXPECT_FALSE(plain_finite) << "the unfused scores should overflow f16";
  for (const char *name : {"out", "dq", "dk", "dv"})
    for (int64_t i = 0; i < big.at(name).numElements(); ++i)
      ASSERT_TRUE(std::isfinite(big.at(name).getFloat(i))) << name << " " << i;
}

// The attention of BSND q, k and v (weighted by w, with its gradients):
// FlashAttentionScore in BSND itself, or in BNSD between Transposes.
Graph bsndGraph(const Case &c, bool native) {
  Graph g("attention_bsnd");
  const TensorType qt{DType::F32, {c.B, c.S, c.N, c.D}}, kt{DType::F32, {c.B, c.S, c.Nkv, c.D}};
  ValueId q = g.addInput("q", qt, InputRole::Data);
  ValueId k = g.addInput("k", kt, InputRole::Data);
  ValueId v = g.addInput("v", kt, InputRole::Data);
  ValueId w = g.addInput("w", qt, InputRole::Data);
  OpBuilder b(g);
  const AttrMap swap{{"perm", std::vector<int64_t>{0, 2, 1, 3}}};
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.D));
  ValueId out;
  if (native) {
    out = b.createMulti("FlashAttentionScore", "fa", {q, k, v},
                        {{"scale", scale}, {"input_layout", std::string("BSND")}})[0];
  } else {
    std::vector<ValueId> heads;
    for (auto [x, name] : {std::pair{q, "tq"}, {k, "tk"}, {v, "tv"}})
      heads.push_back(b.create("Transpose", name, {x}, swap));
    out = b.createMulti("FlashAttentionScore", "fa", heads, {{"scale", scale}})[0];
    out = b.create("Transpose", "tout", {out}, swap);
  }
  addWeightedLoss(g, b, out, out, w, {q, k, v});
  return g;
}

// BSND is an indexing of the same attention: the same bits as BNSD between
// Transposes, forward and backward, multi-head and grouped-query.
TEST(FlashAttention, BsndGivesTheBitsOfBnsdBetweenTransposes) {
  for (const Case &c : {Case{2, 2, 2, 7, 8}, Case{1, 4, 2, 9, 16}}) {
    TensorMap feed;
    feed["q"] = testing::randomTensor(TensorType{DType::F32, {c.B, c.S, c.N, c.D}}, 1);
    feed["k"] = testing::randomTensor(TensorType{DType::F32, {c.B, c.S, c.Nkv, c.D}}, 2);
    feed["v"] = testing::randomTensor(TensorType{DType::F32, {c.B, c.S, c.Nkv, c.D}}, 3);
    feed["w"] = testing::randomTensor(TensorType{DType::F32, {c.B, c.S, c.N, c.D}}, 4);
    auto native = interpret(bsndGraph(c, true), feed);
    auto transposed = interpret(bsndGraph(c, false), feed);
    ASSERT_TRUE(native.isOk()) << native.message();
    ASSERT_TRUE(transposed.isOk()) << transposed.message();
    for (const char *name : {"out", "dq", "dk", "dv"}) {
      const Tensor &a = native->at(name), &b = transposed->at(name);
      ASSERT_EQ(a.type(), b.type()) << name;
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.byteSize())) << name;
    }
  }
}

TEST(FlashAttention, ShapesAndBadInputs) {
  const TensorType q{DType::BF16, {2, 8, 16, 4}}, kv{DType::BF16, {2, 2, 16, 4}};
  auto t = inferOp("FlashAttentionScore", {q, kv, kv}, {{"scale", 0.5}});
  ASSERT_TRUE(t.isOk()) << t.message();
  EXPECT_EQ((*t)[0], q);
  EXPECT_EQ((*t)[1], (TensorType{DType::F32, {2, 8, 16}}));
  EXPECT_FALSE(
      inferOp("FlashAttentionScore",
              {q, TensorType{DType::BF16, {2, 3, 16, 4}}, TensorType{DType::BF16, {2, 3, 16, 4}}},
              {{"scale", 0.5}}))
      << "8 query heads over 3 key/value heads";
  EXPECT_FALSE(inferOp("FlashAttentionScore", {q, kv, kv}, {{"scale", 0.0}}));
  EXPECT_FALSE(inferOp("FlashAttentionScore", {q, kv, kv},
                       {{"scale", 0.5}, {"input_layout", std::string("BHSD")}}));
  // BSND: [B, S, N, D], the statistics still [B, N, S].
  auto bsnd =
      inferOp("FlashAttentionScore",
              {TensorType{DType::BF16, {2, 16, 8, 4}}, TensorType{DType::BF16, {2, 16, 2, 4}},
               TensorType{DType::BF16, {2, 16, 2, 4}}},
              {{"scale", 0.5}, {"input_layout", std::string("BSND")}});
  ASSERT_TRUE(bsnd.isOk()) << bsnd.message();
  EXPECT_EQ((*bsnd)[1], (TensorType{DType::F32, {2, 8, 16}}));
  EXPECT_FALSE(inferOp("FlashAttentionScore",
                       {q, TensorType{DType::F16, kv.shape}, TensorType{DType::F16, kv.shape}},
                       {{"scale", 0.5}}));
}

} // namespace
} // namespace kiln::ops
