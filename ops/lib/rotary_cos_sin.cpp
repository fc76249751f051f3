// RotaryCosSin: the f32 cos and sin tables of rotary position embeddings,
// computed step by step in f32 like Hugging Face Qwen's RotaryEmbedding.
#include <cmath>
#include <string>
#include <vector>

#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

Expected<std::vector<TensorType>> inferRotaryCosSin(const std::vector<TensorType> &in,
                                                    const AttrMap &attrs) {
  const int64_t seq_len = attrs.getInt("seq_len"), dim = attrs.getInt("dim");
  const double base = attrs.getFloat("base");
  if (seq_len < 1)
    return Error("RotaryCosSin seq_len must be >= 1, got " + std::to_string(seq_len));
  if (dim < 2 || dim % 2 != 0)
    return Error("RotaryCosSin dim must be even and >= 2 (the rotary head dim), got " +
                 std::to_string(dim));
  if (!(base > 0) || !std::isfinite(base))
    return Error("RotaryCosSin base must be a finite number > 0, got " + std::to_string(base));
  const double factor = attrs.getFloat("scaling_factor"), low = attrs.getFloat("low_freq_factor"),
               high = attrs.getFloat("high_freq_factor");
  if (!(factor > 0) || !std::isfinite(factor) || !(low > 0) || !(high > low) ||
      !std::isfinite(high) || attrs.getInt("original_max_position") < 1)
    return Error("RotaryCosSin llama3 scaling needs scaling_factor > 0, 0 < low_freq_factor < "
                 "high_freq_factor and original_max_position >= 1");
  const TensorType table{DType::F32, {seq_len, dim}};
  return std::vector<TensorType>{table, table};
}

// Llama 3.1's rope_scaling "llama3" (transformers' _compute_llama3_parameters),
// in f32 as torch computes it: wavelengths 2 pi / inv_freq longer than
// original / low_freq_factor are divided by the factor, shorter than
// original / high_freq_factor kept, and the band between blended linearly in
// original / wavelength.
void scaleLlama3(std::vector<float> &inv_freq, const AttrMap &attrs) {
  const float factor = static_cast<float>(attrs.getFloat("scaling_factor"));
  const float low = static_cast<float>(attrs.getFloat("low_freq_factor"));
  const float high = static_cast<float>(attrs.getFloat("high_freq_factor"));
  const float original = static_cast<float>(attrs.getInt("original_max_position"));
  const float low_freq_wavelen = original / low, high_freq_wavelen = original / high;
  for (float &f : inv_freq) {
    const float wavelen = 2.0f * static_cast<float>(M_PI) / f;
    if (wavelen > low_freq_wavelen) {
      f = f / factor;
    } else if (wavelen >= high_freq_wavelen) {
      const float smooth = (original / wavelen - low) / (high - low);
      f = (1.0f - smooth) * f / factor + smooth * f;
    }
  }
}

// inv_freq = 1 / base^(arange(0, dim, 2) / dim), freqs = t * inv_freq and
// emb = concat(freqs, freqs), each step rounded to f32 as torch does it; only
// cos and sin themselves are evaluated in double for a correctly rounded result.
Status rotaryCosSinKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                          std::vector<Tensor> &out, const AttrMap &attrs) {
  const int64_t seq_len = attrs.getInt("seq_len"), dim = attrs.getInt("dim");
  const float base = static_cast<float>(attrs.getFloat("base"));
  const int64_t half = dim / 2;
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    inv_freq[i] = 1.0f / std::pow(base, exponent);
  }
  if (attrs.getFloat("scaling_factor") != 1.0)
    scaleLlama3(inv_freq, attrs);
  Tensor &cos_t = out[0], &sin_t = out[1];
  for (int64_t t = 0; t < seq_len; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double freq = static_cast<float>(t) * inv_freq[i];
      const float c = static_cast<float>(std::cos(freq)), s = static_cast<float>(std::sin(freq));
      for (int64_t col : {i, i + half}) {
        cos_t.setFloat(t * dim + col, c, ctx.overflow);
        sin_t.setFloat(t * dim + col, s, ctx.overflow);
      }
    }
  return Status::ok();
}

} // namespace

// No inputs, hence nothing to differentiate.
KILN_REGISTER_OP("RotaryCosSin", OpImpl{inferRotaryCosSin, {}, rotaryCosSinKernel});

} // namespace kiln::ops
