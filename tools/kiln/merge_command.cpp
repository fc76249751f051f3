// `kiln merge`: fold a LoRA adapter into its base weights and write the
// result as a Hugging Face model folder (config.json, shards and index).
#include "compiler/frontend/model_loader.h"
#include "formats/hf_checkpoint.h"
#include "session/adapter_merge.h"
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
  session::MergeRequest request;
  request.config = *qwen;
  request.config_path = *config;
  request.weights = opts.weights;
  request.adapter = opts.lora;
  request.output = opts.output;
  request.shard_bytes = *shard_bytes;
  auto merged = session::mergeAdapter(request);
  if (!merged)
    return fail(merged.error());
  if (!merged->unused.empty())
    note(unusedTensorsNote(opts.weights, merged->unused));
  note("merged " + std::to_string(merged->adapted_layers) + " adapted layers (" + merged->adapter +
       ") into " + std::to_string(merged->tensors) + " tensors; wrote " +
       std::to_string(merged->files) + " file(s) to " + opts.output);
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
