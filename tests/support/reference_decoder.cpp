#include "tests/support/reference_decoder.h"

#include <algorithm>
#include <cmath>

#include "tests/support/reference_math.h"

namespace kiln::testing {

std::pair<ReferenceDecoder::Mat, double> ReferenceDecoder::forward(const Tensor &ids) {
  B_ = ids.shape()[0], S_ = ids.shape()[1];
  const int64_t R = B_ * S_, H = c_.hidden_size, V = c_.vocab_size, F = c_.intermediate_size;
  Mat x(R * H);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t h = 0; h < H; ++h)
      x[r * H + h] = w("model.embed_tokens.weight")[ids.getInt(r) * H + h];
  for (int64_t i = 0; i < c_.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    Mat a = attention(p, rmsNorm(x, H, p + "input_layernorm.weight"));
    for (size_t k = 0; k < x.size(); ++k)
      x[k] += a[k];
    Mat n = rmsNorm(x, H, p + "post_attention_layernorm.weight");
    Mat gate = linear(n, H, F, p + "mlp.gate_proj");
    Mat up = linear(n, H, F, p + "mlp.up_proj");
    for (size_t k = 0; k < gate.size(); ++k)
      gate[k] = gate[k] / (1.0 + std::exp(-gate[k])) * up[k];
    Mat m = linear(gate, F, H, p + "mlp.down_proj");
    for (size_t k = 0; k < x.size(); ++k)
      x[k] += m[k];
  }
  x = rmsNorm(x, H, "model.norm.weight");
  Mat logits = linear(x, H, V, c_.tie_word_embeddings ? "model.embed_tokens" : "lm_head");
  const double loss = shiftedCrossEntropy(logits, ids, V);
  return {std::move(logits), loss};
}

double ReferenceDecoder::centralDifference(const Tensor &ids, Tensor &weight, int64_t index) {
  return testing::centralDifference([&] { return forward(ids).second; }, weight, index);
}

// nn.Linear: the bias is there when the checkpoint has one.
ReferenceDecoder::Mat ReferenceDecoder::linear(const Mat &x, int64_t in, int64_t out,
                                               const std::string &module) const {
  LoraFactors lora;
  if (lora_.enabled() && has(frontend::loraAName(module)))
    lora = {w(frontend::loraAName(module)), w(frontend::loraBName(module)), lora_.rank,
            lora_.scale()};
  return referenceLinear(x, in, out, w(module + ".weight"),
                         has(module + ".bias") ? w(module + ".bias") : nullptr, lora);
}

ReferenceDecoder::Mat ReferenceDecoder::rmsNorm(const Mat &x, int64_t width,
                                                const std::string &weight) const {
  return referenceRmsNorm(x, width, w(weight), c_.rms_norm_eps);
}

// theta^(-2i/d), with Llama 3.1's rope_scaling applied as
// _compute_llama3_parameters does.
std::vector<double> ReferenceDecoder::inverseFrequencies() const {
  const int64_t D = c_.head_dim;
  std::vector<double> inv(D / 2);
  for (int64_t i = 0; i < D / 2; ++i)
    inv[i] = std::pow(c_.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(D));
  const frontend::RopeScaling &s = c_.rope_scaling;
  if (!s.enabled())
    return inv;
  const double old_len = static_cast<double>(s.original_max_position_embeddings);
  for (double &f : inv) {
    const double wavelen = 2 * M_PI / f;
    if (wavelen > old_len / s.low_freq_factor) {
      f /= s.factor;
    } else if (wavelen >= old_len / s.high_freq_factor) {
      const double smooth =
          (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      f = (1 - smooth) * f / s.factor + smooth * f;
    }
  }
  return inv;
}

// rotate_half on one head vector at position s.
void ReferenceDecoder::rotate(double *v, int64_t s, const std::vector<double> &inv_freq) const {
  const int64_t D = c_.head_dim, half = D / 2;
  std::vector<double> out(D);
  for (int64_t d = 0; d < D; ++d) {
    const double angle = static_cast<double>(s) * inv_freq[d % half];
    const double rotated = d < half ? -v[d + half] : v[d - half];
    out[d] = v[d] * std::cos(angle) + rotated * std::sin(angle);
  }
  std::copy(out.begin(), out.end(), v);
}

// x [B*S, H] -> o_proj(context) [B*S, H]; query head h reads key/value head
// h / (heads / kv_heads), as repeat_kv pairs them.
ReferenceDecoder::Mat ReferenceDecoder::attention(const std::string &p, const Mat &x) const {
  const int64_t H = c_.hidden_size, hd = c_.head_dim, heads = c_.num_attention_heads;
  const int64_t kv_heads = c_.kvHeads(), group = heads / kv_heads;
  const std::string a = p + "self_attn.";
  Mat q = linear(x, H, heads * hd, a + "q_proj");
  Mat k = linear(x, H, kv_heads * hd, a + "k_proj");
  Mat v = linear(x, H, kv_heads * hd, a + "v_proj");
  if (has(a + "q_norm.weight")) {
    q = rmsNorm(q, hd, a + "q_norm.weight");
    k = rmsNorm(k, hd, a + "k_norm.weight");
  }
  const std::vector<double> inv_freq = inverseFrequencies();
  for (int64_t r = 0; r < B_ * S_; ++r) {
    for (int64_t h = 0; h < heads; ++h)
      rotate(&q[(r * heads + h) * hd], r % S_, inv_freq);
    for (int64_t h = 0; h < kv_heads; ++h)
      rotate(&k[(r * kv_heads + h) * hd], r % S_, inv_freq);
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  Mat ctx(B_ * S_ * heads * hd, 0.0);
  for (int64_t b = 0; b < B_; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kvh = h / group;
      for (int64_t i = 0; i < S_; ++i)
        causalAttentionRow(
            &q[((b * S_ + i) * heads + h) * hd],
            [&](int64_t j) { return &k[((b * S_ + j) * kv_heads + kvh) * hd]; },
            [&](int64_t j) { return &v[((b * S_ + j) * kv_heads + kvh) * hd]; }, i, hd, scale,
            &ctx[((b * S_ + i) * heads + h) * hd]);
    }
  return linear(ctx, heads * hd, H, a + "o_proj");
}

} // namespace kiln::testing
