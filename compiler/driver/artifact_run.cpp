// Binding an artifact run's inputs to the bucket of their seq.
#include "compiler/driver/artifact_run.h"

#include <algorithm>
#include <random>
#include <set>

#include "compiler/autodiff/training_step.h"
#include "compiler/driver/finite_weights.h"
#include "compiler/driver/reference_run.h"
#include "compiler/frontend/random_init.h"
#include "formats/hf_checkpoint.h"
#include "formats/safetensors.h"

namespace kiln::driver {

Expected<PreparedArtifactRun> prepareArtifactRun(const artifact::Artifact &artifact,
                                                 const ArtifactRunRequest &request) {
  const artifact::Manifest &m = artifact.manifest;
  if (request.training != m.model.training)
    return Error(artifact.source + ": compiled " +
                 (m.model.training
                      ? "as a whole training step (kiln compile --training): run it with --training"
                      : "as a forward pass (kiln compile without --training): drop --training, "
                        "or recompile it with kiln compile " +
                            m.model.path + " --training ... -o " + artifact.source));

  KILN_ASSIGN_OR_RETURN(SafetensorsFile data, readSafetensors(request.inputs_path));
  // input_ids pick the bucket; a graph that reads none (a kiln graph JSON
  // model) has one bucket, which its shapes spell out.
  const artifact::Bucket *bucket = &artifact.buckets.front();
  auto ids = data.tensors.find("input_ids");
  if (ids == data.tensors.end()) {
    if (artifact.buckets.size() != 1 || bucket->graph.findInput("input_ids"))
      return Error(request.inputs_path + ": no tensor 'input_ids'");
  } else {
    if (ids->second.dtype() != DType::I64 || ids->second.shape().size() != 2)
      return Error(request.inputs_path + ": 'input_ids' must be i64 [batch, seq], got " +
                   typeToString(ids->second.type()));
    const int64_t batch = ids->second.shape()[0], seq = ids->second.shape()[1];
    KILN_ASSIGN_OR_RETURN(bucket, artifact::selectBucket(artifact, seq));
    if (batch != bucket->batch)
      return Error(request.inputs_path + ": 'input_ids' has batch " + std::to_string(batch) + ", " +
                   artifact.source + " was compiled for batch " + std::to_string(bucket->batch) +
                   "; recompile with --batch " + std::to_string(batch));
  }
  if (m.model.training) {
    // The step ends with AdamW: its state comes with the data.
    std::vector<std::string> missing;
    for (const GraphInput &in : bucket->graph.inputs())
      if ((in.role == InputRole::OptimizerState || in.role == InputRole::Hyperparameter) &&
          !data.tensors.count(in.name))
        missing.push_back(in.name);
    if (!missing.empty())
      return Error(request.inputs_path + ": " + artifact.source +
                   " is a whole training step with AdamW and needs its state in the inputs: '" +
                   missing.front() + "'" +
                   (missing.size() == 1
                        ? std::string(" is missing")
                        : " and " + std::to_string(missing.size() - 1) + " more are missing") +
                   " ('lr' f32[], 'adam.step' i64[], 'adam.m.<param>' and 'adam.v.<param>' f32 "
                   "per parameter; kiln make-inputs " +
                   artifact.source + " --training -o FILE writes a first step's)");
  }

  KILN_ASSIGN_OR_RETURN(artifact::LoadedBucket loaded, artifact::loadBucket(artifact, *bucket));
  KILN_ASSIGN_OR_RETURN(
      ops::TensorMap weights,
      readHfWeights(request.weights_path, finiteWeightsCheck(NonFiniteWeights::Report)));
  // A training step's optimizer state comes with the data.
  KILN_RETURN_IF_ERROR(
      checkFiniteWeights(data.tensors, request.inputs_path, NonFiniteWeights::Report));
  KILN_ASSIGN_OR_RETURN(ops::TensorMap bound,
                        bindModelInputs(loaded.graph, weights, request.weights_path, data.tensors,
                                        request.inputs_path, m.overflow));
  return PreparedArtifactRun{std::move(loaded), std::move(bound), m.overflow};
}

namespace {

// The rows of the embedding table `input_ids` index: the vocabulary. The
// ids may reach the Gather through a reshape, a cast or the wrap an ONNX
// import puts on run-time indices (Where(ids < 0, ids + rows, ids)).
std::optional<int64_t> vocabularyOf(const Graph &graph) {
  const GraphInput *ids = graph.findInput("input_ids");
  if (!ids)
    return std::nullopt;
  std::vector<ValueId> frontier{ids->value};
  std::set<ValueId> seen;
  while (!frontier.empty()) {
    const ValueId v = frontier.back();
    frontier.pop_back();
    if (!seen.insert(v).second)
      continue;
    for (const Node &node : graph.nodes()) {
      if (std::find(node.inputs.begin(), node.inputs.end(), v) == node.inputs.end())
        continue;
      if (node.op == "Gather" && node.inputs.size() == 2 && node.inputs[1] == v &&
          !graph.type(node.inputs[0]).shape.empty())
        return graph.type(node.inputs[0]).shape.front();
      const bool carries_ids = node.op == "Reshape" || node.op == "Cast" || node.op == "Add" ||
                               (node.op == "Where" && node.inputs[0] != v);
      if (carries_ids && node.outputs.size() == 1)
        frontier.push_back(node.outputs[0]);
    }
  }
  return std::nullopt;
}

} // namespace

Expected<ops::TensorMap> makeArtifactInputs(const artifact::Artifact &artifact,
                                            const ArtifactInputsRequest &request) {
  if (request.training && *request.training != artifact.manifest.model.training)
    return Error(artifact.source + ": compiled " +
                 (artifact.manifest.model.training
                      ? "as a whole training step (kiln compile --training), which also takes lr "
                        "and the AdamW state: add --training"
                      : "as a forward pass (kiln compile without --training): drop --training, or "
                        "recompile it with kiln compile " +
                            artifact.manifest.model.path + " --training ... -o " +
                            artifact.source));
  const artifact::Bucket *bucket = &artifact.buckets.front();
  if (request.seq > 0) {
    KILN_ASSIGN_OR_RETURN(bucket, artifact::selectBucket(artifact, request.seq));
  }
  const Graph &graph = bucket->graph;
  ops::TensorMap inputs;
  if (const GraphInput *ids = graph.findInput("input_ids")) {
    std::optional<int64_t> vocab = vocabularyOf(graph);
    if (!vocab || *vocab <= 0)
      return Error(artifact.source + ": no embedding reads 'input_ids', so the vocabulary is "
                                     "unknown; write input_ids with kiln make-inputs MODEL");
    inputs["input_ids"] =
        frontend::randomTokenIds(*vocab, graph.type(ids->value).shape, request.seed);
  } else {
    inputs = frontend::randomGraphInputs(graph, InputRole::Data, request.seed, 1.0);
  }
  for (const GraphInput &in : graph.inputs()) {
    const TensorType &type = graph.type(in.value);
    if (in.role == InputRole::OptimizerState) {
      inputs[in.name] = Tensor(type); // zero moments, step 0
    } else if (in.role == InputRole::Hyperparameter) {
      const bool is_float =
          type.dtype == DType::F32 || type.dtype == DType::F16 || type.dtype == DType::BF16;
      inputs[in.name] = Tensor::scalar(
          type.dtype, in.name == autodiff::kLearningRateName ? request.lr : (is_float ? 1.0 : 0.0));
    }
  }
  return inputs;
}

ops::TensorMap selectArtifactOutputs(const artifact::Artifact &artifact, ops::TensorMap outputs) {
  if (artifact.manifest.model.training)
    return outputs;
  return selectRunOutputs(std::move(outputs));
}

} // namespace kiln::driver
