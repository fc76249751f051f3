// `kiln merge`: fold a LoRA adapter into its base weights and write the
// result as a Hugging Face model folder (config.json, shards and index).
#include <filesystem>
#include <set>

#include "compiler/driver/finite_weights.h"
#include "compiler/frontend/decoder_model.h"
#include "compiler/frontend/lora_adapter.h"
#include "compiler/frontend/model_loader.h"
#include "support/file_io.h"
#include "formats/hf_checkpoint.h"
#include "tools/kiln/cli_common.h"

namespace kiln::cli {
namespace {

struct MergeOptions {
  std::string model, weights, lora, output;
  std::string shard_size = "5GB"; // transformers' save_pretrained default
};

int runMerge(const MergeOptions &opts) {
  auto shard_bytes = parseSizeFlag("--shard-size", opts.shard_size);
  if (!shard_bytes)
    return fail(shard_bytes.error());
  auto qwen = decoderConfigOf(opts.model, "kiln merge");
  if (!qwen)
    return fail(qwen.error());
  auto config = frontend::modelFile(opts.model);
  if (!config)
    return fail(config.error());
  std::error_code ec;
  if (std::filesystem::equivalent(std::filesystem::path(*config).parent_path(), opts.output, ec))
    return fail("-o " + opts.output +
                " is the base model's folder: the merged weights would "
                "replace the base; write them to a new folder");
  auto adapter = frontend::readLoraAdapter(opts.lora);
  if (!adapter)
    return fail(adapter.error());
  const std::string adapter_file =
      (std::filesystem::path(opts.lora) / frontend::kAdapterWeightsFile).string();
  if (Status ok = frontend::checkLoraAdapter(*qwen, *adapter, adapter_file); !ok)
    return fail(ok.error());
  // Nothing is written from NaN or inf: the folder would load and run as a model.
  if (Status finite = driver::checkFiniteWeights(adapter->tensors, adapter_file,
                                                 driver::NonFiniteWeights::RefuseToMerge);
      !finite)
    return fail(finite.error());
  auto base = readHfWeights(opts.weights,
                            driver::finiteWeightsCheck(driver::NonFiniteWeights::RefuseToMerge));
  if (!base)
    return fail(base.error());
  // A kiln checkpoint holds the optimizer state beside the weights: one line
  // for all of it.
  std::set<std::string> parameters;
  for (const frontend::ParamSpec &p : frontend::decoderParameters(*qwen))
    parameters.insert(p.name);
  std::vector<std::string> unused;
  for (const auto &[name, t] : *base)
    if (!parameters.count(name))
      unused.push_back(name);
  if (!unused.empty())
    note(unusedTensorsNote(opts.weights, unused));
  auto merged = frontend::mergeLoraAdapter(*qwen, std::move(*base), *adapter, opts.weights);
  if (!merged)
    return fail(merged.error());
  auto files = writeHfWeights(opts.output, *merged, *shard_bytes);
  if (!files)
    return fail(files.error());
  // The config beside the weights, last and atomically: a folder holding
  // one holds the whole merge, even if the merge was killed.
  auto config_text = readFile(*config);
  if (!config_text)
    return fail(config_text.error());
  if (Status written = writeFileAtomic(
          (std::filesystem::path(opts.output) / "config.json").string(), *config_text);
      !written)
    return fail(written.error().withContext(opts.output + "/config.json"));
  note("merged " + std::to_string(adapter->tensors.size() / 2) + " adapted layers (" +
       adapter->config.toString() + ") into " + std::to_string(merged->size()) +
       " tensors; wrote " + std::to_string(files->size()) + " file(s) to " + opts.output);
  return 0;
}

} // namespace

void registerMergeCommand(CLI::App &app, Action &action) {
  auto opts = std::make_shared<MergeOptions>();
  CLI::App *cmd = app.add_subcommand(
      "merge", "Merge a LoRA adapter into its base weights (W + alpha/r * B A, in the base "
               "dtype) and write a Hugging Face model folder");
  addModelArgument(*cmd, opts->model, ModelArgument::Decoder);
  cmd->add_option("--weights", opts->weights,
                  "the base weights: a safetensors file, a sharded checkpoint's index, or the "
                  "model folder")
      ->required();
  cmd->add_option("--lora", opts->lora, "the PEFT adapter folder")->required();
  cmd->add_option("-o,--output", opts->output, "the model folder to write")->required();
  cmd->add_option("--shard-size", opts->shard_size,
                  "the largest shard (default 5GB, as transformers writes them)")
      ->check(ByteSize);
  cmd->callback([opts, &action] { action = [opts] { return runMerge(*opts); }; });
  suggestOnUnknownArguments(*cmd);
}

} // namespace kiln::cli
