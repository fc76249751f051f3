// modeling_qwen2.py, modeling_llama.py and modeling_qwen3.py's forward (and
// PEFT's LoRA on their linears) written out with plain loops in double
// precision, from the Hugging Face implementations rather than from kiln's
// family description: grouped-query attention by repeat_kv's pairing, q/k/v
// and o biases, Qwen3's per-head q/k norms, Llama 3.1's rope scaling, tied
// embeddings. An implementation independent of the graph builder, the ops
// and the kernels, to test them against.
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

class ReferenceDecoder {
public:
  using Mat = std::vector<double>; // row-major

  // `weights` by Hugging Face name (f32); with a LoRA config, also the
  // adapters by PEFT name, every targeted linear adding (alpha / r) x A^T B^T.
  ReferenceDecoder(const frontend::DecoderConfig &config,
                   const std::map<std::string, Tensor> &weights, frontend::LoraConfig lora = {})
      : c_(config), w_(weights), lora_(std::move(lora)) {}

  // Logits [B*S, V] and the shifted cross-entropy loss.
  std::pair<Mat, double> forward(const Tensor &ids);

  // d loss / d weight[index] by a float64 central difference (a step of
  // 2^-10 either way, then put back).
  double centralDifference(const Tensor &ids, Tensor &weight, int64_t index);

private:
  const float *w(const std::string &name) const { return w_.at(name).dataAs<float>(); }
  bool has(const std::string &name) const { return w_.count(name) > 0; }
  Mat linear(const Mat &x, int64_t in, int64_t out, const std::string &module) const;
  // RMSNorm over rows of `width` channels.
  Mat rmsNorm(const Mat &x, int64_t width, const std::string &weight) const;
  std::vector<double> inverseFrequencies() const;
  void rotate(double *v, int64_t s, const std::vector<double> &inv_freq) const;
  Mat attention(const std::string &p, const Mat &x) const;

  const frontend::DecoderConfig &c_;
  const std::map<std::string, Tensor> &w_;
  frontend::LoraConfig lora_;
  int64_t B_ = 0, S_ = 0;
};

} // namespace kiln::testing
