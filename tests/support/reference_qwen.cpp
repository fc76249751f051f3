#include "tests/support/reference_qwen.h"

#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "compiler/frontend/decoder_model.h"
#include "tests/support/random.h"
#include "tests/support/reference_math.h"

namespace kiln::testing {

std::map<std::string, Tensor> largeRandomQwenWeights(const frontend::DecoderConfig &config,
                                                     const frontend::LoraConfig &lora) {
  std::vector<frontend::ParamSpec> params = frontend::decoderParameters(config);
  if (lora.enabled()) {
    auto adapters = frontend::loraParameters(config, lora);
    EXPECT_TRUE(adapters.isOk()) << adapters.message();
    if (adapters)
      params.insert(params.end(), adapters->begin(), adapters->end());
  }
  std::map<std::string, Tensor> weights;
  uint64_t seed = 100;
  for (const frontend::ParamSpec &p : params) {
    TensorType type{DType::F32, p.shape};
    float lo = -0.25f, hi = 0.25f;
    if (p.kind == frontend::ParamKind::Norm)
      lo = 0.5f, hi = 1.5f;
    else if (p.kind == frontend::ParamKind::Bias)
      lo = -0.2f, hi = 0.2f;
    else if (p.kind == frontend::ParamKind::Embedding)
      lo = -1.0f, hi = 1.0f;
    weights[p.name] = randomTensor(type, seed++, lo, hi);
  }
  return weights;
}

std::pair<ReferenceQwen::Mat, double> ReferenceQwen::forward(const Tensor &ids) {
  B_ = ids.shape()[0], S_ = ids.shape()[1];
  const int64_t R = B_ * S_, H = c_.hidden_size, V = c_.vocab_size, F = c_.mlpWidth();
  const bool bias = !c_.no_bias;
  Mat x(R * H);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t h = 0; h < H; ++h)
      x[r * H + h] = w("transformer.wte.weight")[ids.getInt(r) * H + h];
  for (int64_t i = 0; i < c_.num_hidden_layers; ++i) {
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    Mat n = rmsNorm(x, p + "ln_1.weight");
    Mat qkv = linear(n, H, 3 * H, p + "attn.c_attn", true);
    Mat a = linear(attention(qkv), H, H, p + "attn.c_proj", bias);
    for (size_t k = 0; k < x.size(); ++k)
      x[k] += a[k];
    n = rmsNorm(x, p + "ln_2.weight");
    Mat g1 = linear(n, H, F, p + "mlp.w1", bias);
    Mat g2 = linear(n, H, F, p + "mlp.w2", bias);
    for (size_t k = 0; k < g1.size(); ++k)
      g1[k] *= g2[k] / (1.0 + std::exp(-g2[k]));
    Mat m = linear(g1, F, H, p + "mlp.c_proj", bias);
    for (size_t k = 0; k < x.size(); ++k)
      x[k] += m[k];
  }
  x = rmsNorm(x, "transformer.ln_f.weight");
  Mat logits = linear(x, H, V, c_.tie_word_embeddings ? "transformer.wte" : "lm_head", false);
  const double loss = shiftedCrossEntropy(logits, ids, V);
  return {std::move(logits), loss};
}

double ReferenceQwen::centralDifference(const Tensor &ids, Tensor &weight, int64_t index) {
  return testing::centralDifference([&] { return forward(ids).second; }, weight, index);
}

ReferenceQwen::Mat ReferenceQwen::linear(const Mat &x, int64_t in, int64_t out,
                                         const std::string &module, bool bias) const {
  LoraFactors lora;
  if (lora_.enabled() && isLoraTarget(lora_, module))
    lora = {w(frontend::loraAName(module)), w(frontend::loraBName(module)), lora_.rank,
            lora_.scale()};
  return referenceLinear(x, in, out, w(module + ".weight"), bias ? w(module + ".bias") : nullptr,
                         lora);
}

ReferenceQwen::Mat ReferenceQwen::rmsNorm(const Mat &x, const std::string &weight) const {
  return referenceRmsNorm(x, c_.hidden_size, w(weight), c_.rms_norm_eps);
}

// Rotary on the first D channels of one head vector at position s (rotate_half, non-interleaved).
void ReferenceQwen::rotate(double *v, int64_t s) const {
  const int64_t D = c_.rotaryDim(), half = D / 2;
  std::vector<double> out(D);
  for (int64_t d = 0; d < D; ++d) {
    double angle = s * std::pow(c_.rope_theta, -2.0 * (d % half) / D);
    double rotated = d < half ? -v[d + half] : v[d - half];
    out[d] = v[d] * std::cos(angle) + rotated * std::sin(angle);
  }
  std::copy(out.begin(), out.end(), v);
}

// qkv [B*S, 3H] -> context [B*S, H], causal, per head.
ReferenceQwen::Mat ReferenceQwen::attention(Mat qkv) const {
  const int64_t H = c_.hidden_size, hd = c_.head_dim;
  auto at = [&](int64_t b, int64_t s, int64_t part, int64_t head) {
    return &qkv[(b * S_ + s) * 3 * H + part * H + head * hd];
  };
  for (int64_t b = 0; b < B_; ++b)
    for (int64_t s = 0; s < S_; ++s)
      for (int64_t head = 0; head < c_.num_attention_heads; ++head)
        for (int64_t part : {0, 1})
          rotate(at(b, s, part, head), s);
  const double scale = c_.scale_attn_weights ? 1.0 / std::sqrt(static_cast<double>(hd)) : 1.0;
  Mat ctx(B_ * S_ * H, 0.0);
  for (int64_t b = 0; b < B_; ++b)
    for (int64_t head = 0; head < c_.num_attention_heads; ++head)
      for (int64_t i = 0; i < S_; ++i)
        causalAttentionRow(
            at(b, i, 0, head), [&](int64_t j) { return at(b, j, 1, head); },
            [&](int64_t j) { return at(b, j, 2, head); }, i, hd, scale,
            &ctx[(b * S_ + i) * H + head * hd]);
  return ctx;
}

} // namespace kiln::testing
