// `kiln make-inputs`: random inputs for smoke runs of a model: token ids for a
// Qwen config, every data input of a graph JSON.
#include <random>

#include "compiler/frontend/model_loader.h"
#include "compiler/frontend/random_init.h"
#include "ir/file_io.h"
#include "ir/safetensors.h"
#include "tools/kiln/cli_common.h"
#include "tools/kiln/job_flags.h"

namespace kiln::cli {
namespace {

struct MakeInputsOptions {
  std::string model;
  std::string output;
  int64_t batch = 1;
  int64_t seq = 16;
  uint64_t seed = 0;
  int64_t tokens = 0; // > 0: a token file for kiln train instead
  // The corpus' rule: each token is the one before times `multiplier` plus `offset`, plus noise.
  std::vector<int64_t> rule = {5, 3};
  JobFlags job; // a graph's custom ops
};

// A pre-tokenised corpus in nanoGPT's format (uint16 ids, uint32 past 65535)
// that a model can learn: each token follows from the one before (by
// default times 5 plus 3) with a little noise, so the loss falls well below
// log(vocab). Another rule makes another task to fine-tune on.
int writeTokenFile(const std::string &path, int64_t vocab, int64_t count, uint64_t seed,
                   const std::vector<int64_t> &rule) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> noise(0, 3);
  const size_t width = vocab > 65536 ? 4 : 2;
  std::string bytes;
  bytes.reserve(static_cast<size_t>(count) * width);
  int64_t token = 0;
  for (int64_t i = 0; i < count; ++i) {
    for (size_t b = 0; b < width; ++b)
      bytes.push_back(static_cast<char>((token >> (8 * b)) & 0xff));
    token = (token * rule[0] + rule[1] + noise(rng)) % vocab;
  }
  Status written = writeFileAtomic(path, bytes);
  if (!written)
    return fail(written.error());
  note("wrote " + std::to_string(count) + (width == 2 ? " uint16" : " uint32") + " tokens to " +
       path);
  return 0;
}

int runMakeInputs(const MakeInputsOptions &opts) {
  auto job = resolveJobFlags(opts.job, DType::F32);
  if (!job)
    return fail(job.error());
  frontend::ModelOptions model_options;
  model_options.seq = 2; // only the config is needed
  model_options.ops = job->ops;
  auto model = frontend::loadModel(opts.model, model_options);
  if (!model)
    return fail(model.error());
  SafetensorsFile file;
  if (!model->config) {
    file.tensors = frontend::randomGraphInputs(model->graph, InputRole::Data, opts.seed, 1.0);
    Status written = writeSafetensors(opts.output, file);
    return written ? 0 : fail(written.error());
  }
  if (opts.tokens > 0)
    return writeTokenFile(opts.output, model->config->vocab_size, opts.tokens, opts.seed,
                          opts.rule);
  std::mt19937_64 rng(opts.seed);
  std::uniform_int_distribution<int64_t> token(0, model->config->vocab_size - 1);
  std::vector<int64_t> ids(static_cast<size_t>(opts.batch * opts.seq));
  for (int64_t &id : ids)
    id = token(rng);
  file.tensors["input_ids"] = Tensor::fromInts(DType::I64, {opts.batch, opts.seq}, ids);
  Status written = writeSafetensors(opts.output, file);
  return written ? 0 : fail(written.error());
}

} // namespace

void registerMakeInputsCommand(CLI::App &app, Action &action) {
  auto opts = std::make_shared<MakeInputsOptions>();
  CLI::App *cmd = app.add_subcommand(
      "make-inputs", "Write random inputs for a model: uniform input_ids (i64 [batch, seq]) for "
                     "a Hugging Face config, normal(0, 1) data inputs for a graph JSON");
  addModelArgument(*cmd, opts->model, ModelArgument::AnyModel);
  cmd->add_option("-o,--output", opts->output, "the safetensors file to write")->required();
  cmd->add_option("--batch", opts->batch, "batch size")->check(PositiveInteger);
  cmd->add_option("--seq", opts->seq, "sequence length")->check(PositiveInteger);
  cmd->add_option("--seed", opts->seed, "random seed (default 0)")->check(NonNegativeInteger);
  cmd->add_option("--tokens", opts->tokens,
                  "write a learnable token file of this many tokens for kiln train --data "
                  "(nanoGPT's flat uint16 format) instead")
      ->check(PositiveInteger);
  cmd->add_option("--token-rule", opts->rule,
                  "with --tokens: MUL,ADD, each token the one before times MUL plus ADD, plus "
                  "noise (default 5,3; another rule is another task)")
      ->expected(2)
      ->delimiter(',')
      ->check(IntegerIn(0, 1 << 20));
  addJobFlags(*cmd, opts->job);
  cmd->callback([opts, &action] { action = [opts] { return runMakeInputs(*opts); }; });
  suggestOnUnknownArguments(*cmd);
}

} // namespace kiln::cli
