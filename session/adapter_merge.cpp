#include "session/adapter_merge.h"

#include <filesystem>
#include <set>

#include "compiler/driver/finite_weights.h"
#include "compiler/frontend/decoder_model.h"
#include "compiler/frontend/lora_adapter.h"
#include "formats/hf_checkpoint.h"
#include "support/file_io.h"

namespace kiln::session {

namespace fs = std::filesystem;

Expected<MergeSummary> mergeAdapter(const MergeRequest &request) {
  std::error_code ec;
  if (fs::equivalent(fs::path(request.config_path).parent_path(), request.output, ec))
    return Error("-o " + request.output +
                 " is the base model's folder: the merged weights would "
                 "replace the base; write them to a new folder");
  KILN_ASSIGN_OR_RETURN(frontend::LoraAdapter adapter, frontend::readLoraAdapter(request.adapter));
  const std::string adapter_file =
      (fs::path(request.adapter) / frontend::kAdapterWeightsFile).string();
  KILN_RETURN_IF_ERROR(frontend::checkLoraAdapter(request.config, adapter, adapter_file));
  // Nothing is written from NaN or inf: the folder would load and run as a model.
  KILN_RETURN_IF_ERROR(driver::checkFiniteWeights(adapter.tensors, adapter_file,
                                                  driver::NonFiniteWeights::RefuseToMerge));
  KILN_ASSIGN_OR_RETURN(
      auto base, readHfWeights(request.weights, driver::finiteWeightsCheck(
                                                    driver::NonFiniteWeights::RefuseToMerge)));
  MergeSummary summary;
  std::set<std::string> parameters;
  for (const frontend::ParamSpec &p : frontend::decoderParameters(request.config))
    parameters.insert(p.name);
  for (const auto &[name, t] : base)
    if (!parameters.count(name))
      summary.unused.push_back(name);
  KILN_ASSIGN_OR_RETURN(auto merged, frontend::mergeLoraAdapter(request.config, std::move(base),
                                                                adapter, request.weights));
  KILN_ASSIGN_OR_RETURN(auto files, writeHfWeights(request.output, merged, request.shard_bytes));
  // The config beside the weights, last and atomically: a folder holding
  // one holds the whole merge, even if the merge was killed.
  KILN_ASSIGN_OR_RETURN(std::string config_text, readFile(request.config_path));
  if (Status written =
          writeFileAtomic((fs::path(request.output) / "config.json").string(), config_text);
      !written)
    return written.error().withContext(request.output + "/config.json");
  summary.adapted_layers = adapter.tensors.size() / 2;
  summary.adapter = adapter.config.toString();
  summary.tensors = merged.size();
  summary.files = files.size();
  return summary;
}

} // namespace kiln::session
