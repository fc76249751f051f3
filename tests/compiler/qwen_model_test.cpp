// Tests of the Qwen forward graph: HF parameter names and shapes, node names,
// and numerics on the reference interpreter against a plain-loop transcription
// of modeling_qwen.py.
#include "compiler/frontend/decoder_model.h"

#include <cmath>

#include <gtest/gtest.h>

#include "compiler/frontend/decoder_init.h"
#include "ops/interpreter.h"
#include "ops/op_verifier.h"
#include "tests/support/random.h"
#include "tests/support/reference_qwen.h"

namespace kiln::frontend {
namespace {

DecoderConfig loadConfig(const std::string &name) {
  auto config =
      readDecoderConfig(std::string(KILN_SOURCE_DIR) + "/examples/" + name + "/config.json");
  EXPECT_TRUE(config.isOk()) << config.message();
  return config.isOk() ? *config : DecoderConfig{};
}

Graph build(const DecoderConfig &config, const ModelOptions &options) {
  auto graph = buildDecoderForward(config, options);
  EXPECT_TRUE(graph.isOk()) << graph.message();
  return graph.isOk() ? std::move(graph).value() : Graph();
}

const Node &nodeNamed(const Graph &g, const std::string &name) {
  NodeId id = g.findNode(name);
  EXPECT_NE(id, kNoNode) << "no node " << name;
  static const Node kMissing;
  return id == kNoNode ? kMissing : g.node(id);
}

TEST(QwenModelTest, Qwen14BParametersMatchHuggingFace) {
  Graph g = build(loadConfig("qwen-14b"), ModelOptions{});
  EXPECT_EQ(g.parameterCount(), 14167290880);

  const auto &in = g.inputs();
  ASSERT_EQ(in.size(), 2u + 1 + 40 * 8 + 2);
  EXPECT_EQ(in[0].name, "input_ids");
  EXPECT_EQ(in[1].name, "labels");
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(in[i].role, InputRole::Data);
    EXPECT_EQ(g.type(in[i].value), (TensorType{DType::I64, {1, 2048}}));
  }
  auto expectParam = [&](size_t index, const std::string &name, Shape shape) {
    ASSERT_LT(index, in.size());
    EXPECT_EQ(in[index].name, name) << "input " << index;
    EXPECT_EQ(in[index].role, InputRole::Parameter) << name;
    EXPECT_EQ(g.type(in[index].value), (TensorType{DType::F32, shape})) << name;
  };
  expectParam(2, "transformer.wte.weight", {152064, 5120});
  for (int layer : {0, 39}) {
    const size_t base = 3 + static_cast<size_t>(layer) * 8;
    const std::string p = "transformer.h." + std::to_string(layer) + ".";
    expectParam(base + 0, p + "ln_1.weight", {5120});
    expectParam(base + 1, p + "attn.c_attn.weight", {15360, 5120});
    expectParam(base + 2, p + "attn.c_attn.bias", {15360});
    expectParam(base + 3, p + "attn.c_proj.weight", {5120, 5120});
    expectParam(base + 4, p + "ln_2.weight", {5120});
    expectParam(base + 5, p + "mlp.w1.weight", {13696, 5120});
    expectParam(base + 6, p + "mlp.w2.weight", {13696, 5120});
    expectParam(base + 7, p + "mlp.c_proj.weight", {5120, 13696});
  }
  expectParam(in.size() - 2, "transformer.ln_f.weight", {5120});
  expectParam(in.size() - 1, "lm_head.weight", {152064, 5120});

  ASSERT_EQ(g.outputs().size(), 2u);
  EXPECT_EQ(g.outputs()[0].name, "logits");
  EXPECT_EQ(g.type(g.outputs()[0].value), (TensorType{DType::F32, {1, 2048, 152064}}));
  EXPECT_EQ(g.outputs()[1].name, "loss");
  EXPECT_EQ(g.type(g.outputs()[1].value), (TensorType{DType::F32, {}}));
  Status verified = ops::verifyGraph(g);
  EXPECT_TRUE(verified.isOk()) << verified.message();
}

TEST(QwenModelTest, NodeNamesFollowHuggingFacePaths) {
  Graph g = build(loadConfig("qwen-tiny"), ModelOptions{});
  EXPECT_EQ(nodeNamed(g, "transformer.wte").op, "Gather");
  EXPECT_EQ(nodeNamed(g, "transformer.h.1.ln_1.rsqrt").op, "Rsqrt");
  EXPECT_EQ(nodeNamed(g, "transformer.h.1.attn.c_attn").op, "MatMul");
  EXPECT_EQ(nodeNamed(g, "transformer.h.1.attn.c_attn.bias_add").op, "BiasAdd");
  EXPECT_EQ(nodeNamed(g, "transformer.h.1.attn.causal_mask").op, "CausalMask");
  EXPECT_EQ(nodeNamed(g, "transformer.h.1.attn.softmax").op, "Softmax");
  EXPECT_EQ(nodeNamed(g, "transformer.h.1.attn.c_proj").op, "MatMul");
  EXPECT_EQ(nodeNamed(g, "transformer.h.1.mlp.act").op, "Silu");
  EXPECT_EQ(nodeNamed(g, "transformer.ln_f.mul_weight").op, "Mul");
  EXPECT_EQ(nodeNamed(g, "lm_head").op, "MatMul");
  EXPECT_EQ(nodeNamed(g, "loss").op, "CrossEntropyLoss");
  EXPECT_EQ(g.findNode("transformer.h.2.attn.softmax"), kNoNode); // two layers only

  // SiLU gates w2, not w1 (modeling_qwen.py: w1(x) * silu(w2(x))).
  const Node &act = nodeNamed(g, "transformer.h.1.mlp.act");
  ASSERT_EQ(act.inputs.size(), 1u);
  EXPECT_EQ(g.valueName(act.inputs[0]), "transformer.h.1.mlp.w2.unflatten");
  for (const Node &n : g.nodes())
    EXPECT_EQ(n.provenance.pass, "frontend") << n.name;
}

// Casts appear only where the dtype changes.
TEST(QwenModelTest, CastsOnlyWhereTheDtypeChanges) {
  DecoderConfig config = loadConfig("qwen-tiny");
  Graph f32 = build(config, ModelOptions{1, 8, DType::F32});
  for (const Node &n : f32.nodes())
    EXPECT_NE(n.op, "Cast") << n.name;

  for (bool softmax_in_fp32 : {false, true}) {
    config.softmax_in_fp32 = softmax_in_fp32;
    Graph g = build(config, ModelOptions{1, 8, DType::F16});
    int casts = 0;
    for (const Node &n : g.nodes()) {
      if (n.op != "Cast")
        continue;
      ++casts;
      EXPECT_NE(g.type(n.inputs[0]).dtype, g.type(n.outputs[0]).dtype) << n.name;
    }
    // Per layer: 2 RMSNorms x 2, 2 rotaries x 2, softmax 0 or 2; ln_f 2; logits 1.
    EXPECT_EQ(casts, 2 * (8 + (softmax_in_fp32 ? 2 : 0)) + 3);
    const Node &softmax = nodeNamed(g, "transformer.h.0.attn.softmax");
    EXPECT_EQ(g.type(softmax.inputs[0]).dtype, softmax_in_fp32 ? DType::F32 : DType::F16);
    EXPECT_EQ(g.type(g.outputs()[0].value).dtype, DType::F32);
    Status verified = ops::verifyGraph(g);
    EXPECT_TRUE(verified.isOk()) << verified.message();
  }
}

TEST(QwenModelTest, BiasesAndTiedEmbeddings) {
  DecoderConfig config = loadConfig("qwen-tiny");
  config.no_bias = false;
  config.tie_word_embeddings = true;
  Graph g = build(config, ModelOptions{1, 4, DType::BF16});
  auto typeOf = [&](const std::string &name) {
    const GraphInput *in = g.findInput(name);
    EXPECT_NE(in, nullptr) << name;
    return in ? g.type(in->value) : TensorType{};
  };
  EXPECT_EQ(typeOf("transformer.h.0.attn.c_proj.bias"), (TensorType{DType::BF16, {64}}));
  EXPECT_EQ(typeOf("transformer.h.0.mlp.w1.bias"), (TensorType{DType::BF16, {128}}));
  EXPECT_EQ(typeOf("transformer.h.0.mlp.w2.bias"), (TensorType{DType::BF16, {128}}));
  EXPECT_EQ(typeOf("transformer.h.0.mlp.c_proj.bias"), (TensorType{DType::BF16, {64}}));
  EXPECT_EQ(g.findInput("lm_head.weight"), nullptr);
  const Node &lm_head = nodeNamed(g, "lm_head");
  ASSERT_EQ(lm_head.inputs.size(), 2u);
  EXPECT_EQ(lm_head.inputs[1], g.findInput("transformer.wte.weight")->value);
  EXPECT_EQ(g.parameterCount(), 512 * 64 + 64 +
                                    2 * (2 * 64 + 192 * 64 + 192 + 64 * 64 + 64 +
                                         2 * (128 * 64 + 128) + 64 * 128 + 64));
  Status verified = ops::verifyGraph(g);
  EXPECT_TRUE(verified.isOk()) << verified.message();
}

TEST(QwenModelTest, SequenceLengthAndOptionsAreChecked) {
  DecoderConfig config = loadConfig("qwen-tiny");
  Graph g = build(config, ModelOptions{3, 0, DType::F32});
  EXPECT_EQ(g.type(g.findInput("input_ids")->value).shape, (Shape{3, 32}));

  auto expectError = [&](ModelOptions options, const std::string &fragment) {
    auto result = buildDecoderForward(config, options);
    ASSERT_FALSE(result.isOk()) << fragment;
    EXPECT_NE(result.message().find(fragment), std::string::npos) << result.message();
  };
  expectError({1, 1, DType::F32}, "sequence length 1: expected at least 2");
  expectError({1, 65, DType::F32}, "max_position_embeddings (64)");
  expectError({0, 8, DType::F32}, "batch 0");
  expectError({1, 8, DType::I64}, "dtype i64");
  config.seq_length = 100; // the default exceeds max_position_embeddings
  expectError({1, 0, DType::F32}, "sequence length 100");
  config.head_dim = 8;
  expectError({1, 8, DType::F32}, "field 'kv_channels'");
}

// ---- numerics on the reference interpreter ----

ops::TensorMap bindInputs(const Graph &g, const std::map<std::string, Tensor> &weights, DType dtype,
                          const Tensor &ids) {
  ops::TensorMap inputs{{"input_ids", ids}, {"labels", ids}};
  for (const auto &[name, t] : weights)
    inputs[name] = t.castTo(dtype);
  return inputs;
}

Tensor randomIds(int64_t batch, int64_t seq, int64_t vocab, uint64_t seed) {
  return testing::randomIndices(TensorType{DType::I64, {batch, seq}}, seed, vocab);
}

TEST(QwenModelTest, TinyFreshInitLossIsLogVocab) {
  DecoderConfig config = loadConfig("qwen-tiny");
  auto weights = initDecoderWeights(config, 7);
  Tensor ids = randomIds(2, 32, 512, 11);
  double f32_loss = 0;
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(std::string(dtypeName(dtype)));
    Graph g = build(config, ModelOptions{2, 0, dtype});
    auto out = ops::interpret(g, bindInputs(g, weights, dtype, ids));
    ASSERT_TRUE(out.isOk()) << out.message();
    const Tensor &logits = out->at("logits");
    EXPECT_EQ(logits.type(), (TensorType{DType::F32, {2, 32, 512}}));
    double loss = out->at("loss").getFloat(0);
    ASSERT_TRUE(std::isfinite(loss));
    EXPECT_NEAR(loss, std::log(512.0), 0.1);
    if (dtype == DType::F32)
      f32_loss = loss;
    else
      EXPECT_NEAR(loss, f32_loss, 1e-2 * f32_loss);
  }
}

struct Variant {
  const char *name;
  double rotary_pct;
  bool no_bias, tie, scale;
};

class QwenReferenceTest : public ::testing::TestWithParam<Variant> {};

TEST_P(QwenReferenceTest, MatchesPlainLoopForward) {
  const Variant &v = GetParam();
  DecoderConfig config = loadConfig("qwen-tiny");
  config.rotary_pct = v.rotary_pct;
  config.no_bias = v.no_bias;
  config.tie_word_embeddings = v.tie;
  config.scale_attn_weights = v.scale;
  auto weights = testing::largeRandomQwenWeights(config);
  Tensor ids = randomIds(2, 9, config.vocab_size, 5);

  Graph g = build(config, ModelOptions{2, 9, DType::F32});
  auto out = ops::interpret(g, bindInputs(g, weights, DType::F32, ids));
  ASSERT_TRUE(out.isOk()) << out.message();
  auto [logits, loss] = testing::ReferenceQwen(config, weights).forward(ids);

  const Tensor &got = out->at("logits");
  ASSERT_EQ(got.numElements(), static_cast<int64_t>(logits.size()));
  double max_err = 0, max_abs = 0;
  for (size_t k = 0; k < logits.size(); ++k) {
    max_err = std::max(max_err, std::abs(got.getFloat(static_cast<int64_t>(k)) - logits[k]));
    max_abs = std::max(max_abs, std::abs(logits[k]));
  }
  EXPECT_GT(max_abs, 0.5); // the comparison is not between near-zero numbers
  EXPECT_LT(max_err, 1e-3 * max_abs);
  EXPECT_NEAR(out->at("loss").getFloat(0), loss, 1e-4 * loss);
}

INSTANTIATE_TEST_SUITE_P(Variants, QwenReferenceTest,
                         ::testing::Values(Variant{"Tiny", 1.0, true, false, true},
                                           Variant{"PartialRotaryBiasesTied", 0.5, false, true,
                                                   false}),
                         [](const auto &info) { return std::string(info.param.name); });

} // namespace
} // namespace kiln::frontend
