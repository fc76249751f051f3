// `kiln make-inputs`: random inputs for smoke runs of a model: token ids for a
// Qwen config, every data input of a graph JSON, everything but the weights
// an artifact runs on (a training artifact's first AdamW state included).
#include "compiler/artifact/artifact.h"
#include "compiler/driver/artifact_run.h"
#include "compiler/frontend/model_loader.h"
#include "compiler/frontend/random_init.h"
#include "formats/safetensors.h"
#include "support/file_io.h"
#include "tokenizer/learnable_tokens.h"
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
  bool training = false; // an artifact's whole step: its AdamW state too
  double lr = 3e-4;
  int64_t tokens = 0; // > 0: a token file for kiln train instead
  // The corpus' rule: each token is the one before times `multiplier` plus `offset`, plus noise.
  std::vector<int64_t> rule = {5, 3};
  JobFlags job; // a graph's custom ops
};

// A learnable corpus (tokenizer/learnable_tokens.h) for kiln train --data.
int writeTokenFile(const std::string &path, int64_t vocab, int64_t count, uint64_t seed,
                   const std::vector<int64_t> &rule) {
  Status written = tokenizer::writeLearnableTokens(path, vocab, count, seed, {rule[0], rule[1]});
  if (!written)
    return fail(written.error());
  note("wrote " + std::to_string(count) +
       (tokenizer::tokenWidth(vocab) == 2 ? " uint16" : " uint32") + " tokens to " + path);
  return 0;
}

// An artifact fixed its shapes, job and kind of step when it was compiled:
// the inputs follow from it.
int makeArtifactInputs(const MakeInputsOptions &opts, const CLI::App &cmd) {
  for (const char *flag : {"--batch", "--tokens", "--token-rule"})
    if (cmd.count(flag) > 0)
      return usage(std::string(flag) + ": " + opts.model +
                   " is an artifact, whose batch and lengths kiln compile fixed (kiln inspect "
                   "shows them); drop the flag");
  for (const CLI::Option *o : cmd.get_options())
    if (o->count() > 0 && o->get_group() == "Job")
      return usage(o->get_name() + ": " + opts.model +
                   " is an artifact: its job was fixed by kiln compile; drop the flag");
  auto loaded = artifact::readArtifact(opts.model);
  if (!loaded)
    return fail(loaded.error());
  driver::ArtifactInputsRequest request;
  request.seq = cmd.count("--seq") > 0 ? opts.seq : 0;
  request.seed = opts.seed;
  request.lr = opts.lr;
  request.training = opts.training;
  auto inputs = driver::makeArtifactInputs(*loaded, request);
  if (!inputs)
    return fail(inputs.error());
  SafetensorsFile file;
  file.tensors = std::move(*inputs);
  Status written = writeSafetensors(opts.output, file);
  if (!written)
    return fail(written.error());
  const size_t n = file.tensors.size();
  note("wrote " + std::to_string(n) + (n == 1 ? " tensor to " : " tensors to ") + opts.output +
       (opts.training ? " (with lr and a first AdamW step's state: step 0, zero moments)" : ""));
  return 0;
}

int runMakeInputs(const MakeInputsOptions &opts, const CLI::App &cmd) {
  if (opts.model.ends_with(".kiln"))
    return makeArtifactInputs(opts, cmd);
  if (opts.training)
    return usage("--training: " + opts.model +
                 " is not an artifact; kiln run MODEL --training takes input_ids alone (an "
                 "artifact compiled with --training also takes lr and the AdamW state)");
  if (cmd.count("--lr") > 0)
    return usage("--lr: only a training artifact's inputs hold a learning rate (with --training)");
  auto job = resolveJobFlags(opts.job, driver::kDefaultModelDType);
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
  file.tensors["input_ids"] =
      frontend::randomTokenIds(model->config->vocab_size, {opts.batch, opts.seq}, opts.seed);
  Status written = writeSafetensors(opts.output, file);
  return written ? 0 : fail(written.error());
}

} // namespace

void registerMakeInputsCommand(CLI::App &app, Action &action) {
  auto opts = std::make_shared<MakeInputsOptions>();
  CLI::App *cmd = app.add_subcommand(
      "make-inputs", "Write random inputs for a model: uniform input_ids (i64 [batch, seq]) for "
                     "a Hugging Face config, normal(0, 1) data inputs for a graph JSON");
  addModelArgument(*cmd, opts->model, ModelArgument::AnyModel, "or an artifact (FILE.kiln)");
  cmd->add_option("-o,--output", opts->output, "the safetensors file to write")->required();
  cmd->add_option("--batch", opts->batch, "batch size")->check(PositiveInteger);
  cmd->add_option("--seq", opts->seq, "sequence length")->check(PositiveInteger);
  cmd->add_option("--seed", opts->seed, "random seed (default 0)")->check(NonNegativeInteger);
  cmd->add_flag("--training", opts->training,
                "for an artifact compiled with --training: also lr and a first AdamW step's "
                "state (adam.step 0, zero adam.m.* and adam.v.*)");
  cmd->add_option("--lr", opts->lr, "with --training: the learning rate written (default 3e-4)")
      ->check(FinitePositive);
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
  cmd->callback(
      [opts, cmd, &action] { action = [opts, cmd] { return runMakeInputs(*opts, *cmd); }; });
  suggestOnUnknownArguments(*cmd);
}

} // namespace kiln::cli
