#include "compiler/driver/evaluation.h"

#include <optional>

#include <spdlog/spdlog.h>

#include "compiler/driver/finite_weights.h"
#include "compiler/driver/training.h"
#include "compiler/frontend/decoder_parameters.h"
#include "compiler/frontend/lora_adapter.h"
#include "formats/hf_checkpoint.h"

namespace kiln::driver {

Expected<PreparedEval> prepareEvaluation(const EvalRequest &request,
                                         const frontend::DecoderConfig &config,
                                         const ResolvedJob &job, const KernelSettings &settings) {
  PreparedEval prepared;
  KILN_ASSIGN_OR_RETURN(
      prepared.weights,
      readHfWeights(request.weights_path, finiteWeightsCheck(NonFiniteWeights::Report)));
  KILN_RETURN_IF_ERROR(
      frontend::checkWeightsFamily(config, prepared.weights, request.weights_path));
  ModelRequest model = request.model;
  if (!request.lora_path.empty()) {
    const std::string source = request.lora_path + "/" + frontend::kAdapterWeightsFile;
    KILN_ASSIGN_OR_RETURN(frontend::LoraAdapter adapter,
                          frontend::readLoraAdapter(request.lora_path));
    KILN_RETURN_IF_ERROR(checkFiniteWeights(adapter.tensors, source, NonFiniteWeights::Report));
    KILN_RETURN_IF_ERROR(frontend::checkLoraAdapter(config, adapter, source));
    model.lora = adapter.config;
    prepared.weights.insert(adapter.tensors.begin(), adapter.tensors.end());
  }
  parallel::ParallelConfig one;
  one.devices = one.dp = 1;
  KILN_ASSIGN_OR_RETURN(prepared.program,
                        compileEvalProgram(model, job, settings, one, model.batch, nullptr));
  // One line for what the forward does not read (a checkpoint's optimizer state), as kiln run says
  // it.
  std::vector<std::string> unused;
  for (const auto &[name, t] : prepared.weights)
    if (!prepared.program.stages.front().graph.findInput(name))
      unused.push_back(name);
  if (!unused.empty())
    spdlog::warn("{}", unusedTensorsNote(request.weights_path, unused));
  return prepared;
}

} // namespace kiln::driver
