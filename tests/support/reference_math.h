// The pieces the float64 reference models (reference_qwen.h,
// reference_decoder.h) share: nn.Linear with PEFT's LoRA term, RMSNorm, the
// shifted next-token cross entropy and a central difference of the loss.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "compiler/frontend/lora_config.h"
#include "ir/tensor.h"

namespace kiln::testing {

using Mat = std::vector<double>; // row-major

// The adapters of one linear layer: A [r, in] and B [out, r], or none.
struct LoraFactors {
  const float *a = nullptr, *b = nullptr;
  int64_t rank = 0;
  double scale = 0;
};

// x [rows, in] W^T + bias (when not null) + scale * x A^T B^T (when adapted).
Mat referenceLinear(const Mat &x, int64_t in, int64_t out, const float *weight, const float *bias,
                    const LoraFactors &lora = {});

// x * rsqrt(mean(x^2) + eps) * weight over rows of `width` channels.
Mat referenceRmsNorm(const Mat &x, int64_t width, const float *weight, double eps);

// Mean cross entropy of logits [B*S, V] at rows (b, s < S-1) against ids (b, s+1).
double shiftedCrossEntropy(const Mat &logits, const Tensor &ids, int64_t vocab);

// d loss / d weight[index] by a float64 central difference: the weight moved
// by an exact step of 2^-10 either way (and put back), `loss` evaluated each time.
double centralDifference(const std::function<double()> &loss, Tensor &weight, int64_t index);

} // namespace kiln::testing
