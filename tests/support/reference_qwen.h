// modeling_qwen.py's forward (and PEFT's LoRA on its linears) written out
// with plain loops in double precision: an implementation independent of
// the graph builder, the ops and the kernels, to test them against.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "compiler/frontend/decoder_config.h"
#include "compiler/frontend/lora_config.h"
#include "ir/tensor.h"

namespace kiln::testing {

// Weights large enough that attention, rotary and the gate all shape the
// output (f32, by HF name); with `lora`, also its adapters, B non-zero so
// that every adapter gradient is.
std::map<std::string, Tensor> largeRandomQwenWeights(const frontend::DecoderConfig &config,
                                                     const frontend::LoraConfig &lora = {});

class ReferenceQwen {
public:
  using Mat = std::vector<double>; // row-major

  // `weights` by Hugging Face name; with a LoRA config, `weights` also holds
  // the adapters by PEFT name and every targeted linear adds
  // (alpha / r) x A^T B^T (no dropout).
  ReferenceQwen(const frontend::DecoderConfig &config, const std::map<std::string, Tensor> &weights,
                frontend::LoraConfig lora = {})
      : c_(config), w_(weights), lora_(std::move(lora)) {
    // PEFT's config for Qwen's own recipe when none is named.
    if (lora_.targets.empty())
      lora_.targets = {"c_attn", "c_proj", "w1", "w2"};
  }

  // Logits [B*S, V] and the shifted cross-entropy loss.
  std::pair<Mat, double> forward(const Tensor &ids);

  // d loss / d weight[index] by a float64 central difference: `weight`, one
  // of the weights this model reads, moved by an exact step of 2^-10 either
  // way (and put back).
  double centralDifference(const Tensor &ids, Tensor &weight, int64_t index);

private:
  const float *w(const std::string &name) const { return w_.at(name).dataAs<float>(); }
  // nn.Linear `module` (weight "<module>.weight"), bias "<module>.bias" when `bias`.
  Mat linear(const Mat &x, int64_t in, int64_t out, const std::string &module, bool bias) const;
  Mat rmsNorm(const Mat &x, const std::string &weight) const;
  void rotate(double *v, int64_t s) const;
  Mat attention(Mat qkv) const;

  const frontend::DecoderConfig &c_;
  const std::map<std::string, Tensor> &w_;
  frontend::LoraConfig lora_;
  int64_t B_ = 0, S_ = 0;
};

} // namespace kiln::testing
