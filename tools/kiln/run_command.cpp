// `kiln run`: compile a model and run its kernels (or, with --reference, the
// reference interpreter), forward or forward and backward, from safetensors
// weights and inputs.
#include <cmath>
#include <iostream>

#include "compiler/driver/kernels.h"
#include "compiler/driver/reference_run.h"
#include "ir/safetensors.h"
#include "runtime/executor.h"
#include "tools/kiln/cli_common.h"
#include "tools/kiln/job_flags.h"

namespace kiln::cli {
namespace {

struct RunOptions {
  driver::ReferenceRunRequest request;
  std::string outputs;
  JobFlags job;
  driver::KernelCacheSettings cache;
  bool reference = false;
};

// Compiles the prepared graph's kernels and runs them.
Expected<ops::TensorMap> runCompiled(driver::PreparedRun &run, const driver::ResolvedJob &job,
                                     const driver::KernelCacheSettings &cache) {
  KILN_ASSIGN_OR_RETURN(driver::JobKernels kernels,
                        driver::compileJobKernels(run.graph, job, cache));
  for (const std::string &line : kernels.kernels.miss_explanations)
    std::cerr << "kiln: cache miss: " << line << "\n";
  KILN_ASSIGN_OR_RETURN(auto executor,
                        runtime::Executor::create(run.graph, std::move(kernels.kernels)));
  KILN_ASSIGN_OR_RETURN(ops::TensorMap outputs, executor->run(run.inputs));
  return driver::selectRunOutputs(std::move(outputs));
}

int runRun(const RunOptions &opts) {
  // Without --dtype or a job's precision, run in f32: exact reference results.
  auto job = resolveJobFlags(opts.job, DType::F32);
  if (!job)
    return fail(job.error());
  driver::ReferenceRunRequest request = opts.request;
  request.job = &*job;
  request.instrumentation = instrumentationOf(opts.job);
  Expected<ops::TensorMap> outputs = Error("not run");
  if (opts.reference) {
    outputs = driver::runReference(request);
  } else {
    auto run = driver::prepareModelRun(request);
    if (!run)
      return fail(run.error());
    outputs = runCompiled(*run, *job, opts.cache);
  }
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
      "run", "Compile a model with a job's passes and run its kernels (or the reference "
             "interpreter)");
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
  cmd->add_flag("--reference", opts->reference,
                "run the reference interpreter instead of the compiled kernels");
  addJobFlags(*cmd, opts->job);
  addKernelCacheFlags(*cmd, opts->cache);
  cmd->callback([opts, &action] { action = [opts] { return runRun(*opts); }; });
}

} // namespace kiln::cli
