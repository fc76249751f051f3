// Runs a model on the reference interpreter from safetensors weights and
// inputs, forward only or forward and backward: what `kiln run` does.
#pragma once

#include <map>
#include <string>

#include "compiler/driver/job.h"
#include "formats/safetensors.h"
#include "ops/interpreter.h"
#include "passes/pass_manager.h"
#include "support/error.h"

namespace kiln::driver {

struct ReferenceRunRequest {
  std::string model;        // config.json, a folder holding it, or a kiln graph JSON
  std::string weights_path; // safetensors with the parameters by their HF names
  std::string inputs_path;  // safetensors with input_ids (i64 [B,S]) and optional labels
  // A PEFT LoRA adapter folder: its adapters applied, the base frozen (with
  // training, grad.<adapter> only). Dropout is not applied, as in eval mode.
  std::string lora_path;
  bool training = false; // also compute grad.<param> for every parameter
  // The scalar output an ONNX model's training differentiates (--loss): its
  // outputs are kept, beside grad.<initializer> for every float initializer.
  std::string loss;
  // An ONNX model's input shapes by name (--input-shape); the inputs file's
  // tensors give the shapes of the inputs it holds.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  DType dtype = DType::F32; // compute dtype of the model
  OverflowMode overflow = OverflowMode::InfNan;
  // When set, the job's passes run before the graph does, so fused groups
  // execute with their kernels' numerics; dtype and overflow come from it.
  const ResolvedJob *job = nullptr;
  passes::Instrumentation instrumentation;
};

// A model ready to run: its graph after the job's passes and its bound inputs.
struct PreparedRun {
  Graph graph;
  ops::TensorMap inputs;
  OverflowMode overflow = OverflowMode::InfNan;
  bool onnx = false; // an ONNX model: its outputs are all reported, by their names
};
Expected<PreparedRun> prepareModelRun(const ReferenceRunRequest &request);

// The outputs a run reports, in f32: "logits" (f32 [B,S,V]) and "loss" (f32
// []), and with training "grad_norm" and "grad.<param>" per parameter; with
// `all` (an ONNX model) every output, in its own dtype.
ops::TensorMap selectRunOutputs(ops::TensorMap outputs, bool all = false);

// prepareModelRun, then the reference interpreter.
Expected<ops::TensorMap> runReference(const ReferenceRunRequest &request);

// Binds graph inputs from weights and data: every Parameter from `weights`
// (converted to the graph's dtype), "labels" defaulting to "input_ids". Errors
// name `weights_source` and the missing or ill-shaped tensor.
Expected<ops::TensorMap> bindModelInputs(const Graph &graph, const ops::TensorMap &weights,
                                         const std::string &weights_source,
                                         const ops::TensorMap &data, const std::string &data_source,
                                         OverflowMode overflow);

} // namespace kiln::driver
