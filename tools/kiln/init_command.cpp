// `kiln init`: write freshly initialised Qwen weights with their HF names.
#include <iostream>

#include "compiler/frontend/model_loader.h"
#include "compiler/frontend/qwen_init.h"
#include "ir/safetensors.h"
#include "tools/kiln/cli_common.h"

namespace kiln::cli {
namespace {

struct InitOptions {
  std::string model;
  std::string output;
  uint64_t seed = 0;
  std::vector<std::string> scales; // PATTERN=FACTOR
};

int runInit(const InitOptions &opts) {
  frontend::ModelOptions model_options;
  model_options.seq = 2; // the graph is not needed, only the config
  auto model = frontend::loadModel(opts.model, model_options);
  if (!model)
    return fail(model.error());
  if (!model->config)
    return fail(opts.model + ": kiln init needs a Hugging Face config.json, not a graph");
  SafetensorsFile file;
  file.tensors = frontend::initQwenWeights(*model->config, opts.seed);
  for (const std::string &scale : opts.scales) {
    size_t eq = scale.rfind('=');
    double factor = 0;
    try {
      factor = eq == std::string::npos ? 0 : std::stod(scale.substr(eq + 1));
    } catch (...) {
      eq = std::string::npos;
    }
    if (eq == std::string::npos)
      return fail("--scale: expected PATTERN=FACTOR, got '" + scale + "'");
    Status s = frontend::scaleWeights(file.tensors, scale.substr(0, eq), factor);
    if (!s)
      return fail(s.error());
  }
  file.metadata["format"] = "pt";
  Status written = writeSafetensors(opts.output, file);
  if (!written)
    return fail(written.error());
  std::cerr << "kiln: wrote " << file.tensors.size() << " tensors to " << opts.output << "\n";
  return 0;
}

} // namespace

void registerInitCommand(CLI::App &app, Action &action) {
  auto opts = std::make_shared<InitOptions>();
  CLI::App *cmd = app.add_subcommand(
      "init", "Initialise Qwen weights (normal 0.02, c_proj 0.02/sqrt(2*layers)) to safetensors");
  cmd->add_option("MODEL", opts->model, "config.json or a folder holding it")->required();
  cmd->add_option("-o,--output", opts->output, "the safetensors file to write")->required();
  cmd->add_option("--seed", opts->seed, "random seed (default 0)");
  cmd->add_option("--scale", opts->scales,
                  "multiply the weights matching a glob: 'transformer.h.*.attn.c_attn.weight=40'");
  cmd->callback([opts, &action] { action = [opts] { return runInit(*opts); }; });
}

} // namespace kiln::cli
