// Tests of Qwen weight initialisation: names, shapes, distributions, determinism.
#include "compiler/frontend/decoder_init.h"

#include <cmath>

#include <gtest/gtest.h>

#include "compiler/frontend/decoder_model.h"

namespace kiln::frontend {
namespace {

DecoderConfig tinyConfig() {
  auto config = readDecoderConfig(std::string(KILN_SOURCE_DIR) + "/examples/qwen-tiny/config.json");
  EXPECT_TRUE(config.isOk()) << config.message();
  return config.isOk() ? *config : DecoderConfig{};
}

struct Moments {
  double mean = 0, std = 0;
};

Moments moments(const Tensor &t) {
  double sum = 0, sq = 0;
  const int64_t n = t.numElements();
  for (int64_t i = 0; i < n; ++i) {
    double v = t.getFloat(i);
    sum += v;
    sq += v * v;
  }
  Moments m;
  m.mean = sum / n;
  m.std = std::sqrt(sq / n - m.mean * m.mean);
  return m;
}

TEST(QwenInitTest, OneF32TensorPerGraphParameter) {
  DecoderConfig config = tinyConfig();
  auto weights = initDecoderWeights(config, 0);
  auto graph = buildDecoderForward(config, ModelOptions{1, 4, DType::BF16});
  ASSERT_TRUE(graph.isOk()) << graph.message();
  size_t params = 0;
  for (const GraphInput &in : graph->inputs()) {
    if (in.role != InputRole::Parameter)
      continue;
    ++params;
    auto it = weights.find(in.name);
    ASSERT_NE(it, weights.end()) << in.name;
    EXPECT_EQ(it->second.type(), (TensorType{DType::F32, graph->type(in.value).shape})) << in.name;
  }
  EXPECT_EQ(weights.size(), params);
}

TEST(QwenInitTest, DistributionsFollowInitWeights) {
  DecoderConfig config = tinyConfig();
  config.no_bias = false;
  auto weights = initDecoderWeights(config, 3);
  // modeling_qwen.py: std 0.02, c_proj 0.02 / sqrt(2 * layers) = 0.01 with two layers.
  const double proj_std = 0.02 / std::sqrt(2.0 * 2);
  for (const auto &[name, t] : weights) {
    SCOPED_TRACE(name);
    const bool is_norm = name.find("ln_") != std::string::npos;
    const bool is_bias = name.size() > 5 && name.substr(name.size() - 5) == ".bias";
    if (is_norm || is_bias) {
      const float want = is_norm ? 1.0f : 0.0f;
      for (int64_t i = 0; i < t.numElements(); ++i)
        ASSERT_EQ(t.getFloat(i), want);
      continue;
    }
    const bool is_proj = name.find("c_proj.weight") != std::string::npos;
    const double want = is_proj ? proj_std : 0.02;
    Moments m = moments(t);
    // At least 4096 samples each: the sample std is within a few percent.
    EXPECT_NEAR(m.std, want, 0.05 * want);
    EXPECT_NEAR(m.mean, 0.0, 5 * want / std::sqrt(static_cast<double>(t.numElements())));
  }
}

TEST(QwenInitTest, DeterministicPerSeed) {
  DecoderConfig config = tinyConfig();
  auto a = initDecoderWeights(config, 42);
  auto b = initDecoderWeights(config, 42);
  auto c = initDecoderWeights(config, 43);
  EXPECT_EQ(a, b);
  EXPECT_FALSE(a.at("transformer.wte.weight") == c.at("transformer.wte.weight"));
  // Parameters of one seed draw from unrelated streams.
  EXPECT_FALSE(a.at("transformer.h.0.mlp.w1.weight") == a.at("transformer.h.0.mlp.w2.weight"));
}

TEST(QwenInitTest, AddingParametersLeavesOthersUnchanged) {
  DecoderConfig config = tinyConfig();
  auto base = initDecoderWeights(config, 9);
  config.no_bias = false;            // adds biases
  config.tie_word_embeddings = true; // removes lm_head
  auto changed = initDecoderWeights(config, 9);
  EXPECT_EQ(changed.count("lm_head.weight"), 0u);
  size_t shared = 0;
  for (const auto &[name, t] : changed) {
    auto it = base.find(name);
    if (it == base.end())
      continue;
    ++shared;
    EXPECT_EQ(t, it->second) << name;
  }
  EXPECT_EQ(shared, base.size() - 1); // all but lm_head
}

} // namespace
} // namespace kiln::frontend
