// `kiln eval`: a model's held-out loss and perplexity on a token file, its
// forward compiled once for the job and run over consecutive windows
// (session/held_out_eval.h).
#include <iostream>

#include "session/held_out_eval.h"
#include "tools/kiln/cli_common.h"
#include "tools/kiln/job_flags.h"

namespace kiln::cli {
namespace {

struct EvalOptions {
  driver::EvalRequest request;
  std::string data, data_dtype = "auto", format = "text";
  int64_t max_tokens = 0;
  JobFlags job;
  driver::KernelSettings kernels;
};

int runEval(EvalOptions opts) {
  driver::ModelRequest &model = opts.request.model;
  auto job = resolveJobFlags(opts.job, driver::kDefaultModelDType);
  if (!job)
    return fail(job.error());
  auto config = decoderConfigOf(model.model, "kiln eval");
  if (!config)
    return fail(config.error());
  auto data_dtype = runtime::parseTokenDType(opts.data_dtype, config->vocab_size);
  if (!data_dtype)
    return fail(data_dtype.error());
  if (model.seq == 0)
    model.seq = config->seq_length;
  if (opts.max_tokens > 0 && opts.max_tokens < model.seq * model.batch)
    return usage("--max-tokens " + std::to_string(opts.max_tokens) + " is less than one batch of " +
                 std::to_string(model.batch) + " windows of " + std::to_string(model.seq) +
                 " tokens (" + std::to_string(model.seq * model.batch) +
                 "): raise it, or lower --batch or --seq");
  session::HeldOutEval eval;
  eval.request = opts.request;
  eval.data = opts.data;
  eval.data_dtype = *data_dtype;
  eval.max_tokens = opts.max_tokens;
  eval.kernels = opts.kernels;
  auto record = session::evaluateHeldOut(eval, *config, *job);
  if (!record)
    return fail(record.error());
  if (opts.format == "json") {
    nlohmann::json json = record->toJson();
    json["seq"] = model.seq;
    json["batch"] = model.batch;
    std::cout << json.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << "loss " << record->loss << "\nperplexity " << record->perplexity << "\ntokens "
            << record->tokens << " (" << record->windows << " windows of " << model.seq
            << ")\ntokens/s " << static_cast<int64_t>(record->tokens_per_s) << "\n";
  if (record->overflow)
    std::cout << "overflow: a kernel raised the float status or the loss is not finite; kiln "
                 "debug overflow with the same flags names the op\n";
  return kExitOk;
}

} // namespace

void registerEvalCommand(CLI::App &app, Action &action) {
  auto opts = std::make_shared<EvalOptions>();
  CLI::App *cmd = app.add_subcommand(
      "eval", "A model's mean loss, perplexity and tokens/s on held-out tokens: the forward "
              "compiled once, run over consecutive windows of the file");
  addModelArgument(*cmd, opts->request.model.model, ModelArgument::Decoder);
  cmd->add_option("--weights", opts->request.weights_path,
                  "the parameters: a safetensors file (a kiln checkpoint too), a sharded "
                  "checkpoint's index, or the model folder")
      ->required();
  cmd->add_option("--lora", opts->request.lora_path,
                  "a PEFT LoRA adapter folder, applied to the weights (without dropout)");
  cmd->add_option("--data", opts->data,
                  "held-out tokens: a flat token file (as --data of kiln train) or safetensors "
                  "with input_ids")
      ->required();
  addDataDTypeFlag(*cmd, opts->data_dtype);
  cmd->add_option("--seq", opts->request.model.seq,
                  "tokens a window (default: the config's seq_length)")
      ->check(PositiveInteger);
  cmd->add_option("--batch", opts->request.model.batch, "windows a run (default 1)")
      ->check(PositiveInteger);
  cmd->add_option("--max-tokens", opts->max_tokens,
                  "evaluate at most this many tokens from the file's start (default: all)")
      ->check(PositiveInteger);
  cmd->add_option("--format", opts->format, "text or json")->check(OneOf({"text", "json"}));
  addJobFlags(*cmd, opts->job);
  addKernelFlags(*cmd, opts->kernels);
  cmd->callback([opts, &action] { action = [opts] { return runEval(*opts); }; });
  suggestOnUnknownArguments(*cmd);
}

} // namespace kiln::cli
