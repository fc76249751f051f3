// The training step as one graph: forward and loss, backward, global gradient
// norm and the AdamW update of every parameter.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "support/error.h"

namespace kiln::autodiff {

struct TrainingStepOptions {
  // Append AdamW: inputs "adam.step" (i64, steps taken so far), "lr" (f32) and
  // per parameter "adam.m.<name>", "adam.v.<name>" (f32); outputs carry the
  // input names and hold the updated values, so one step's outputs feed the next.
  bool optimizer = true;
  // Add an output "grad.<name>" per parameter holding its gradient.
  bool output_gradients = false;
  bool keep_logits = false;  // keep the forward graph's "logits" output
  bool keep_outputs = false; // keep every forward output (an imported model's, by its names)
  // The scalar float output differentiated: "loss" for kiln's decoders, the
  // output an imported model names (kiln run model.onnx --loss NAME).
  std::string loss = "loss";
  // Add the input "loss_scale" (f32 scalar, Hyperparameter): the backward
  // starts from d(loss * loss_scale), so every gradient is scaled by it (fp16
  // loss scaling); the "loss" output stays unscaled.
  bool loss_scale_input = false;
  // Add the output "grad_norm" (the trainer computes it after the reduction).
  bool grad_norm = true;
  double beta1 = 0.9; // AdamW defaults of the Qwen technical report
  double beta2 = 0.95;
  double eps = 1e-6;
  double weight_decay = 0.1;
};

inline std::string adamMomentName(const std::string &param) { return "adam.m." + param; }
inline std::string adamVelocityName(const std::string &param) { return "adam.v." + param; }
inline constexpr const char *kAdamStepName = "adam.step";
inline constexpr const char *kLearningRateName = "lr";
inline std::string gradientName(const std::string &param) { return "grad." + param; }
// A weight's compute copy: the weight in the dtype the step computes in
// (compiler/parallel/weight_copies.h).
inline std::string weightCopyName(const std::string &param) { return "compute." + param; }
inline constexpr const char *kLossScaleName = "loss_scale";
inline constexpr const char *kGradScaleName = "grad_scale";

// `forward` must have a scalar float output named `options.loss` (errors
// list its outputs) and its parameters as inputs of role Parameter. With
// `grad_norm`, adds the output "grad_norm" (f32, the global L2 norm of all
// gradients, before any update).
Expected<Graph> buildTrainingStep(const Graph &forward, const TrainingStepOptions &options);

// The value of `forward`'s output `name`, when it is a scalar float (a loss
// to differentiate); otherwise an error naming it and listing the outputs.
Expected<ValueId> lossOutput(const Graph &forward, const std::string &name);

// The AdamW update on its own, for training that reduces the gradients
// between backward and update (data parallelism, loss scaling, clipping).
// Inputs: each parameter (Parameter, its type in `params`), "grad.<name>"
// (f32, Data), "adam.m.<name>", "adam.v.<name>", "adam.step", "lr" and
// "grad_scale" (f32 scalar: every gradient is multiplied by it first — the
// unscale, the data-parallel mean and the clip in one factor). Outputs: the
// updated parameter and moments under the input names, and "adam.step" + 1.
// A parameter in `compute_copies` also has its compute copy in that dtype
// (weightCopyName, role WeightCopy) as an input, which nothing reads (the
// runtime hands it over so the new copy may be written over its bytes), and
// as an output: the Cast of the updated parameter.
Expected<Graph> buildOptimizerStep(const std::vector<std::pair<std::string, TensorType>> &params,
                                   const TrainingStepOptions &options,
                                   const std::map<std::string, DType> &compute_copies = {});

} // namespace kiln::autodiff
