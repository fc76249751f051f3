// The pieces the float64 reference models (reference_qwen.h,
// reference_decoder.h) share: nn.Linear with PEFT's LoRA term, RMSNorm, the
// shifted next-token cross entropy and a central difference of the loss.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "compiler/frontend/lora_config.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "ops/interpreter.h"

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

// softmax(q k_j^T * scale) v_j over the keys j <= i of one query row i (a
// causal attention row), added into out[0, hd); key(j) and value(j) give
// the rows of position j.
void causalAttentionRow(const double *q, const std::function<const double *(int64_t)> &key,
                        const std::function<const double *(int64_t)> &value, int64_t i, int64_t hd,
                        double scale, double *out);

// The inputs of a model graph: `ids` as input_ids and labels, the weights
// (by name, cast to the graph's dtype).
ops::TensorMap modelFeed(const Graph &graph, const std::map<std::string, Tensor> &weights,
                         const Tensor &ids);

// d loss / d weight[index] by a float64 central difference: the weight moved
// by an exact step of 2^-10 either way (and put back), `loss` evaluated each time.
double centralDifference(const std::function<double()> &loss, Tensor &weight, int64_t index);

} // namespace kiln::testing
