// `kiln run`: run a model on the reference interpreter, forward or forward
// and backward, from safetensors weights and inputs.
#include <cmath>
#include <iostream>

#include "compiler/driver/reference_run.h"
#include "ir/safetensors.h"
#include "tools/kiln/cli_common.h"
#include "tools/kiln/job_flags.h"

namespace kiln::cli {
namespace {

struct RunOptions {
  driver::ReferenceRunRequest request;
  std::string outputs;
  JobFlags job;
};

int runRun(const RunOptions &opts) {
  // Without --dtype or a job's precision, run in f32: exact reference results.
  auto job = resolveJobFlags(opts.job, DType::F32);
  if (!job)
    return fail(job.error());
  driver::ReferenceRunRequest request = opts.request;
  request.job = &*job;
  request.instrumentation = instrumentationOf(opts.job);
  auto outputs = driver::runReference(request);
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
  CLI::App *cmd = app.add_subcommand(
      "run", "Compile a model with a job's passes and run it on the reference interpreter");
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
  addJobFlags(*cmd, opts->job);
  cmd->callback([opts, &action] { action = [opts] { return runRun(*opts); }; });
}

} // namespace kiln::cli
