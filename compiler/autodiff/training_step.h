// The training step as one graph: forward and loss, backward, global gradient
// norm and the AdamW update of every parameter.
#pragma once

#include <string>

#include "ir/error.h"
#include "ir/graph.h"

namespace kiln::autodiff {

struct TrainingStepOptions {
  // Append AdamW: inputs "adam.step" (i64, steps taken so far), "lr" (f32) and
  // per parameter "adam.m.<name>", "adam.v.<name>" (f32); outputs carry the
  // input names and hold the updated values, so one step's outputs feed the next.
  bool optimizer = true;
  // Add an output "grad.<name>" per parameter holding its gradient.
  bool output_gradients = false;
  bool keep_logits = false; // keep the forward graph's "logits" output
  double beta1 = 0.9;       // AdamW defaults of the Qwen technical report
  double beta2 = 0.95;
  double eps = 1e-6;
  double weight_decay = 0.1;
};

inline std::string adamMomentName(const std::string &param) { return "adam.m." + param; }
inline std::string adamVelocityName(const std::string &param) { return "adam.v." + param; }
inline constexpr const char *kAdamStepName = "adam.step";
inline constexpr const char *kLearningRateName = "lr";
inline std::string gradientName(const std::string &param) { return "grad." + param; }

// `forward` must have a scalar float output "loss" and its parameters as
// inputs of role Parameter. Adds the output "grad_norm" (f32, the global L2
// norm of all gradients, before any update).
Expected<Graph> buildTrainingStep(const Graph &forward, const TrainingStepOptions &options);

} // namespace kiln::autodiff
