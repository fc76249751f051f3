#include "compiler/driver/reference_run.h"

#include <optional>

#include <spdlog/spdlog.h>

#include "compiler/autodiff/training_step.h"
#include "compiler/driver/compile.h"
#include "compiler/driver/finite_weights.h"
#include "compiler/driver/training_loss.h"
#include "compiler/frontend/decoder_parameters.h"
#include "compiler/frontend/lora_adapter.h"
#include "compiler/frontend/model_loader.h"
#include "compiler/frontend/onnx/onnx_import.h"
#include "formats/hf_checkpoint.h"
#include "ops/index_inputs.h"
#include "passes/fusion/flash_attention_fusion.h"

namespace kiln::driver {

Expected<ops::TensorMap> bindModelInputs(const Graph &graph, const ops::TensorMap &weights,
                                         const std::string &weights_source,
                                         const ops::TensorMap &data, const std::string &data_source,
                                         OverflowMode overflow) {
  ops::TensorMap bound;
  for (const GraphInput &in : graph.inputs()) {
    const TensorType &want = graph.type(in.value);
    const bool is_param = isWeight(in.role);
    const ops::TensorMap &from = is_param ? weights : data;
    const std::string &source = is_param ? weights_source : data_source;
    auto it = from.find(in.name);
    if (it == from.end() && in.name == "labels")
      it = data.find("input_ids");
    if (it == from.end())
      return Error(source + ": no tensor '" + in.name + "' (the model needs " + typeToString(want) +
                   ")");
    const Tensor &t = it->second;
    if (t.shape() != want.shape)
      return Error(source + ": tensor '" + it->first + "' has shape " + shapeToString(t.shape()) +
                   ", the model needs " + shapeToString(want.shape));
    if (isFloat(t.dtype()) != isFloat(want.dtype))
      return Error(source + ": tensor '" + it->first + "' is " + std::string(dtypeName(t.dtype())) +
                   ", the model needs " + std::string(dtypeName(want.dtype)));
    bound[in.name] = t.dtype() == want.dtype ? t : t.castTo(want.dtype, overflow);
    if (!is_param) {
      // The compiled kernels clamp an index; refuse it here, as the reference kernels
      // do. The file's values, before a cast to the graph's integer type could wrap them.
      Status in_range = ops::checkIndexInput(graph, in, t, it->first);
      if (!in_range)
        return in_range.error().withContext(source);
    }
  }
  std::vector<std::string> unused;
  for (const auto &[name, t] : weights)
    if (!graph.findInput(name))
      unused.push_back(name);
  if (!unused.empty()) // one line, however many (a checkpoint's optimizer state)
    spdlog::warn("{}", unusedTensorsNote(weights_source, unused));
  return bound;
}

Expected<PreparedRun> prepareModelRun(const ReferenceRunRequest &request) {
  KILN_ASSIGN_OR_RETURN(SafetensorsFile data, readSafetensors(request.inputs_path));
  // A Qwen config takes its batch and sequence from input_ids; a graph JSON
  // has its shapes written down.
  const DType dtype = request.job ? request.job->dtype : request.dtype;
  const OverflowMode overflow = request.job ? request.job->overflow : request.overflow;
  frontend::ModelOptions model_options;
  model_options.dtype = dtype;
  if (request.job)
    model_options.ops = request.job->ops;
  model_options.input_shapes = request.input_shapes;
  if (frontend::isOnnxPath(request.model))
    for (const auto &[name, t] : data.tensors)
      model_options.input_shapes.emplace(name, t.shape());
  auto ids = data.tensors.find("input_ids");
  if (ids != data.tensors.end() && !frontend::isOnnxPath(request.model)) {
    if (ids->second.dtype() != DType::I64 || ids->second.shape().size() != 2)
      return Error(request.inputs_path + ": 'input_ids' must be i64 [batch, seq], got " +
                   typeToString(ids->second.type()));
    model_options.batch = ids->second.shape()[0];
    model_options.seq = ids->second.shape()[1];
  }
  std::optional<frontend::LoraAdapter> adapter;
  if (!request.lora_path.empty()) {
    KILN_ASSIGN_OR_RETURN(adapter, frontend::readLoraAdapter(request.lora_path));
    KILN_RETURN_IF_ERROR(checkFiniteWeights(adapter->tensors,
                                            request.lora_path + "/" + frontend::kAdapterWeightsFile,
                                            NonFiniteWeights::Report));
    model_options.lora = adapter->config;
    model_options.lora.dropout = 0; // as PEFT in eval mode
  }
  KILN_ASSIGN_OR_RETURN(frontend::LoadedModel model,
                        frontend::loadModel(request.model, model_options));
  if (adapter) {
    if (!model.config)
      return Error(request.lora_path + ": a LoRA adapter applies to a Hugging Face decoder, "
                                       "not a kiln graph");
    KILN_RETURN_IF_ERROR(frontend::checkLoraAdapter(
        *model.config, *adapter, request.lora_path + "/" + frontend::kAdapterWeightsFile));
  }
  if (model.config && ids == data.tensors.end())
    return Error(request.inputs_path + ": no tensor 'input_ids'");
  autodiff::TrainingStepOptions step;
  step.optimizer = false;
  step.output_gradients = true;
  step.keep_logits = true;
  if (request.training) {
    KILN_ASSIGN_OR_RETURN(step.loss, trainingLoss(model, request.model, request.loss));
  }
  // An imported model keeps its outputs, by their names, beside grad.<initializer>.
  step.keep_outputs = model.onnx;
  step.grad_norm = !model.onnx;
  Graph graph = std::move(model.graph);
  if (request.job) // the job's fused attention, before its gradient is built
    KILN_RETURN_IF_ERROR(
        passes::fuseAttentionBeforeAutodiff(graph, *request.job->context).status());
  if (request.training) {
    KILN_ASSIGN_OR_RETURN(graph, autodiff::buildTrainingStep(graph, step));
  }
  if (request.job) {
    KILN_RETURN_IF_ERROR(compileGraph(graph, *request.job, request.instrumentation).status());
  }

  ops::TensorMap weights = std::move(model.weights); // an ONNX model's initializers
  if (!request.weights_path.empty() || !model.onnx) {
    KILN_ASSIGN_OR_RETURN(
        ops::TensorMap from_file,
        readHfWeights(request.weights_path, finiteWeightsCheck(NonFiniteWeights::Report)));
    for (auto &[name, t] : from_file) // a weights file overrides initializers by name
      weights[name] = std::move(t);
  }
  if (model.config)
    KILN_RETURN_IF_ERROR(
        frontend::checkWeightsFamily(*model.config, weights, request.weights_path));
  if (adapter)
    weights.insert(adapter->tensors.begin(), adapter->tensors.end());
  KILN_ASSIGN_OR_RETURN(
      ops::TensorMap bound,
      bindModelInputs(graph, weights,
                      request.weights_path.empty() ? request.model : request.weights_path,
                      data.tensors, request.inputs_path, overflow));
  return PreparedRun{std::move(graph), std::move(bound), overflow, model.onnx};
}

ops::TensorMap selectRunOutputs(ops::TensorMap outputs, bool all) {
  if (all)
    return outputs;
  ops::TensorMap result;
  for (auto &[name, t] : outputs) {
    if (name != "logits" && name != "loss" && name != "grad_norm" && name.rfind("grad.", 0) != 0)
      continue;
    result[name] = t.dtype() == DType::F32 ? std::move(t) : t.castTo(DType::F32);
  }
  return result;
}

Expected<ops::TensorMap> runReference(const ReferenceRunRequest &request) {
  KILN_ASSIGN_OR_RETURN(PreparedRun run, prepareModelRun(request));
  ops::InterpretOptions options;
  options.overflow = run.overflow;
  KILN_ASSIGN_OR_RETURN(ops::TensorMap outputs, ops::interpret(run.graph, run.inputs, options));
  return selectRunOutputs(std::move(outputs), run.onnx);
}

} // namespace kiln::driver
