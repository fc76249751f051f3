// `kiln run`: run a model on the reference interpreter, forward or forward
// and backward, from safetensors weights and inputs.
#include <cmath>
#include <iostream>

#include "compiler/driver/reference_run.h"
#include "ir/safetensors.h"
#include "tools/kiln/cli_common.h"

namespace kiln::cli {
namespace {

struct RunOptions {
  driver::ReferenceRunRequest request;
  std::string outputs;
};

int runRun(const RunOptions &opts) {
  auto outputs = driver::runReference(opts.request);
  if (!outputs)
    return fail(outputs.error());
  SafetensorsFile file;
  file.tensors = std::move(*outputs);
  Status written = writeSafetensors(opts.outputs, file);
  if (!written)
    return fail(written.error());
  if (auto it = file.tensors.find("loss"); it != file.tensors.end())
    std::cout << "loss " << it->second.getFloat(0) << "\n";
  if (auto it = file.tensors.find("grad_norm"); it != file.tensors.end())
    std::cout << "grad_norm " << it->second.getFloat(0) << "\n";
  return 0;
}

} // namespace

void registerRunCommand(CLI::App &app, Action &action) {
  auto opts = std::make_shared<RunOptions>();
  CLI::App *cmd = app.add_subcommand("run", "Run a model on the reference interpreter");
  cmd->add_option("MODEL", opts->request.model,
                  "config.json, a folder holding it, or a kiln graph JSON")
      ->required();
  cmd->add_option("--weights", opts->request.weights_path, "safetensors with the parameters")
      ->required();
  cmd->add_option("--inputs", opts->request.inputs_path,
                  "safetensors with input_ids (i64 [B,S]) and optional labels")
      ->required();
  cmd->add_option("--outputs", opts->outputs, "safetensors to write logits, loss (and grads) to")
      ->required();
  cmd->add_flag("--training", opts->request.training, "also compute grad.<param> per parameter");
  addDTypeFlag(*cmd, "--dtype", opts->request.dtype, "compute dtype of the model (default f32)");
  addOverflowFlag(*cmd, opts->request.overflow);
  cmd->callback([opts, &action] { action = [opts] { return runRun(*opts); }; });
}

} // namespace kiln::cli
