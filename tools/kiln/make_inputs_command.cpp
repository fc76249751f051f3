// `kiln make-inputs`: random token ids for smoke runs of a model.
#include <iostream>
#include <random>

#include "compiler/frontend/model_loader.h"
#include "ir/safetensors.h"
#include "tools/kiln/cli_common.h"

namespace kiln::cli {
namespace {

struct MakeInputsOptions {
  std::string model;
  std::string output;
  int64_t batch = 1;
  int64_t seq = 16;
  uint64_t seed = 0;
};

int runMakeInputs(const MakeInputsOptions &opts) {
  frontend::ModelOptions model_options;
  model_options.seq = 2; // only the config is needed
  auto model = frontend::loadModel(opts.model, model_options);
  if (!model)
    return fail(model.error());
  if (!model->config)
    return fail(opts.model + ": kiln make-inputs needs a Hugging Face config.json");
  std::mt19937_64 rng(opts.seed);
  std::uniform_int_distribution<int64_t> token(0, model->config->vocab_size - 1);
  std::vector<int64_t> ids(static_cast<size_t>(opts.batch * opts.seq));
  for (int64_t &id : ids)
    id = token(rng);
  SafetensorsFile file;
  file.tensors["input_ids"] = Tensor::fromInts(DType::I64, {opts.batch, opts.seq}, ids);
  Status written = writeSafetensors(opts.output, file);
  return written ? 0 : fail(written.error());
}

} // namespace

void registerMakeInputsCommand(CLI::App &app, Action &action) {
  auto opts = std::make_shared<MakeInputsOptions>();
  CLI::App *cmd = app.add_subcommand(
      "make-inputs", "Write uniformly random input_ids (i64 [batch, seq]) for a model");
  cmd->add_option("MODEL", opts->model, "config.json or a folder holding it")->required();
  cmd->add_option("-o,--output", opts->output, "the safetensors file to write")->required();
  cmd->add_option("--batch", opts->batch, "batch size")->check(CLI::PositiveNumber);
  cmd->add_option("--seq", opts->seq, "sequence length")->check(CLI::PositiveNumber);
  cmd->add_option("--seed", opts->seed, "random seed (default 0)");
  cmd->callback([opts, &action] { action = [opts] { return runMakeInputs(*opts); }; });
}

} // namespace kiln::cli
