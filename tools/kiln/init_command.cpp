// `kiln init`: write freshly initialised weights: a decoder config's with their
// HF names, or random ones for every parameter input of a graph JSON.

#include "compiler/frontend/initial_weights.h"
#include "formats/safetensors.h"
#include "support/printable_text.h"
#include "tools/kiln/cli_common.h"
#include "tools/kiln/job_flags.h"

namespace kiln::cli {
namespace {

struct InitOptions {
  std::string model;
  std::string output;
  uint64_t seed = 0;
  std::vector<std::string> scales;                          // PATTERN=FACTOR
  double std_dev = 0.02;                                    // graph parameters
  JobFlags job;                                             // a graph's custom ops
  std::map<std::string, std::vector<int64_t>> input_shapes; // an ONNX model's
};

int runInit(const InitOptions &opts) {
  auto job = resolveJobFlags(opts.job, driver::kDefaultModelDType);
  if (!job)
    return fail(job.error());
  frontend::ModelOptions model_options;
  model_options.seq = 2; // the graph is not needed, only the config
  model_options.ops = job->ops;
  model_options.input_shapes = opts.input_shapes;
  auto model = frontend::loadModel(opts.model, model_options);
  if (!model)
    return fail(model.error());
  std::vector<frontend::WeightScale> scales;
  for (const std::string &scale : opts.scales) { // the flag's check saw PATTERN=FACTOR
    const size_t eq = scale.rfind('=');
    scales.push_back({scale.substr(0, eq), std::stod(scale.substr(eq + 1))});
  }
  auto weights = frontend::initialWeights(*model, opts.model, opts.seed, opts.std_dev, scales);
  if (!weights)
    return fail(weights.error());
  SafetensorsFile file;
  file.tensors = std::move(*weights);
  file.metadata["format"] = "pt";
  Status written = writeSafetensors(opts.output, file);
  if (!written)
    return fail(written.error());
  note("wrote " + std::to_string(file.tensors.size()) + " tensors to " + opts.output);
  return 0;
}

} // namespace

void registerInitCommand(CLI::App &app, Action &action) {
  auto opts = std::make_shared<InitOptions>();
  CLI::App *cmd = app.add_subcommand(
      "init", "Initialise weights to safetensors: a Hugging Face config's (normal 0.02; Qwen "
              "v1's c_proj 0.02/sqrt(2*layers)), or a graph JSON's parameters (normal --std)");
  addModelArgument(*cmd, opts->model, ModelArgument::AnyModel);
  cmd->add_option("-o,--output", opts->output, "the safetensors file to write")->required();
  cmd->add_option("--seed", opts->seed, "random seed (default 0)")->check(NonNegativeInteger);
  addInputShapeFlag(*cmd, opts->input_shapes);
  cmd->add_option("--scale", opts->scales,
                  "multiply the weights matching a glob: 'transformer.h.*.attn.c_attn.weight=40'")
      ->check(CLI::Validator(
          [](std::string &scale) -> std::string {
            const size_t eq = scale.rfind('=');
            std::string factor = eq == std::string::npos ? "" : scale.substr(eq + 1);
            if (eq == 0 || eq == std::string::npos || !FiniteNonNegative(factor).empty())
              return "expected PATTERN=FACTOR (a finite FACTOR of at least 0), got '" +
                     printableName(scale) + "'";
            return {};
          },
          "PATTERN=FACTOR", "SCALE"));
  cmd->add_option("--std", opts->std_dev, "standard deviation of a graph's parameters")
      ->check(FiniteNonNegative);
  addJobFlags(*cmd, opts->job);
  cmd->callback([opts, &action] { action = [opts] { return runInit(*opts); }; });
  suggestOnUnknownArguments(*cmd);
}

} // namespace kiln::cli
