// `kiln run`: compile a model and run its kernels (or, with --reference, the
// reference interpreter), forward or forward and backward, from safetensors
// weights and inputs; or run an artifact's kernels without compiling.
#include <iostream>

#include "compiler/driver/artifact_run.h"
#include "compiler/driver/kernels.h"
#include "compiler/driver/reference_run.h"
#include "formats/safetensors.h"
#include "session/model_run.h"
#include "tools/kiln/cli_common.h"
#include "tools/kiln/job_flags.h"
#include "tools/kiln/loss_flags.h"
#include "tools/kiln/model_run_flags.h"

namespace kiln::cli {
namespace {

struct RunOptions {
  driver::ReferenceRunRequest request;
  std::string outputs;
  JobFlags job;
  driver::KernelSettings cache;
  bool reference = false;
  bool trust_artifact = false;
  std::string profile_dir;
};

// Writes the outputs and prints the loss (the output `loss` names) and the
// gradient norm; then, as the trainer does, a line when the step overflowed:
// an output is inf or NaN, or the float status is set (in saturation mode
// the only trace).
int writeOutputs(const std::string &path, ops::TensorMap outputs, uint32_t float_status,
                 const std::string &loss = "loss") {
  SafetensorsFile file;
  file.tensors = std::move(outputs);
  Status written = writeSafetensors(path, file);
  if (!written)
    return fail(written.error());
  if (auto it = file.tensors.find(loss); it != file.tensors.end() && it->second.numElements() == 1)
    std::cout << "loss " << it->second.getFloat(0) << "\n";
  if (auto it = file.tensors.find("grad_norm"); it != file.tensors.end())
    std::cout << "grad_norm " << it->second.getFloat(0) << "\n";
  const std::string non_finite = session::firstNonFinite(file.tensors);
  if (!non_finite.empty() || float_status != 0) {
    char status[16];
    std::snprintf(status, sizeof(status), "0x%x", float_status);
    std::cout << "overflow: "
              << (non_finite.empty() ? "the outputs are finite but may be wrong (a result was "
                                       "saturated)"
                                     : non_finite)
              << "; float status " << status << (float_status != 0 ? " (set)" : " (clear)")
              << "; kiln debug overflow with the same flags names the op\n";
  }
  return 0;
}

// Compiles the prepared graph's kernels and runs them.
Expected<ops::TensorMap> runCompiled(driver::PreparedRun &run, const driver::ResolvedJob &job,
                                     const driver::KernelSettings &cache,
                                     const std::string &profile_dir, runtime::FloatStatus &status) {
  KILN_ASSIGN_OR_RETURN(driver::JobKernels kernels,
                        driver::compileJobKernels(run.graph, job, cache));
  for (const std::string &line : kernels.kernels.miss_explanations)
    note("cache miss: " + line);
  if (!kernels.kernels.fallbacks.empty())
    note(codegen::fallbackSummary(kernels.kernels.fallbacks));
  KILN_ASSIGN_OR_RETURN(
      ops::TensorMap outputs,
      session::runKernels(run.graph, std::move(kernels.kernels), run.inputs, profile_dir, status));
  return driver::selectRunOutputs(std::move(outputs), run.onnx);
}

// Runs an artifact's bucket for the inputs' seq: nothing is compiled.
int runArtifact(const RunOptions &opts, const CLI::App &cmd) {
  // The job was fixed when the artifact was compiled.
  for (const CLI::Option *o : cmd.get_options())
    if (o->count() > 0 && (o->get_group() == "Job" || o->get_group() == "Pass instrumentation" ||
                           o->get_group() == "Kernel cache"))
      return usage(o->get_name() + ": " + opts.request.model +
                   " is an artifact: its job and kernels were fixed by kiln compile (kiln inspect "
                   "shows them); drop the flag or recompile");
  if (!opts.request.lora_path.empty())
    return usage("--lora: " + opts.request.model +
                 " is an artifact, compiled without adapters; run the model's config with --lora");
  if (!opts.request.loss.empty())
    return usage("--loss: " + opts.request.model +
                 " is an artifact: its loss was fixed by kiln compile --training --loss; drop "
                 "--loss");
  auto loaded = artifact::readArtifact(opts.request.model);
  if (!loaded)
    return fail(loaded.error());
  if (Status trusted = artifact::checkTrustedSigner(*loaded, opts.trust_artifact); !trusted)
    return fail(trusted.error());
  driver::ArtifactRunRequest request;
  request.weights_path = opts.request.weights_path;
  request.inputs_path = opts.request.inputs_path;
  request.training = opts.request.training;
  auto run = driver::prepareArtifactRun(*loaded, request);
  if (!run)
    return fail(run.error());
  Expected<ops::TensorMap> outputs = Error("not run");
  runtime::FloatStatus status;
  if (opts.reference)
    outputs = session::runInterpreter(run->bucket.graph, run->inputs, run->overflow, status);
  else
    outputs = session::runKernels(run->bucket.graph, std::move(run->bucket.kernels), run->inputs,
                                  opts.profile_dir, status);
  if (!outputs)
    return fail(outputs.error());
  return writeOutputs(opts.outputs, driver::selectArtifactOutputs(*loaded, std::move(*outputs)),
                      status.get());
}

int runRun(const RunOptions &opts, const CLI::App &cmd) {
  // The interpreter runs no kernels: there is nothing to time.
  if (opts.reference && !opts.profile_dir.empty())
    return usage("--profile times the compiled kernels, and --reference runs the reference "
                 "interpreter instead of them: drop one of the two");
  if (opts.request.model.ends_with(".kiln"))
    return runArtifact(opts, cmd);
  const driver::ReferenceRunRequest &run = opts.request;
  if (int rc = checkModelRunFlags(run.model, run.weights_path, run.training, run.loss); rc != 0)
    return rc;
  auto job = resolveJobFlags(opts.job, driver::kDefaultModelDType);
  if (!job)
    return fail(job.error());
  driver::ReferenceRunRequest request = opts.request;
  request.job = &*job;
  request.instrumentation = instrumentationOf(opts.job);
  Expected<ops::TensorMap> outputs = Error("not run");
  runtime::FloatStatus status;
  if (opts.reference) {
    auto run = driver::prepareModelRun(request);
    if (!run)
      return fail(run.error());
    outputs = session::runInterpreter(run->graph, run->inputs, run->overflow, status);
    if (outputs)
      outputs = driver::selectRunOutputs(std::move(*outputs), run->onnx);
  } else {
    auto run = driver::prepareModelRun(request);
    if (!run)
      return fail(run.error());
    outputs = runCompiled(*run, *job, opts.cache, opts.profile_dir, status);
  }
  if (!outputs)
    return fail(outputs.error());
  return writeOutputs(opts.outputs, std::move(*outputs), status.get(),
                      opts.request.loss.empty() ? "loss" : opts.request.loss);
}

} // namespace

void registerRunCommand(CLI::App &app, Action &action) {
  auto opts = std::make_shared<RunOptions>();
  CLI::App *cmd = app.add_subcommand(
      "run", "Compile a model with a job's passes and run its kernels (or the reference "
             "interpreter)");
  addModelArgument(*cmd, opts->request.model, ModelArgument::AnyModel,
                   "or an artifact (FILE.kiln, from kiln compile -o; run without compiling)");
  cmd->add_option("--weights", opts->request.weights_path,
                  "the parameters: a safetensors file, a sharded checkpoint's index, or the model "
                  "folder (an ONNX model's initializers are its weights; this overrides them by "
                  "name)");
  cmd->add_option("--inputs", opts->request.inputs_path,
                  "safetensors with input_ids (i64 [B,S]) and optional labels; for an ONNX "
                  "model, its graph inputs by name")
      ->required();
  addInputShapeFlag(*cmd, opts->request.input_shapes);
  cmd->add_option("--outputs", opts->outputs, "safetensors to write logits, loss (and grads) to")
      ->required();
  cmd->add_flag("--training", opts->request.training, "also compute grad.<param> per parameter");
  addLossFlag(*cmd, opts->request.loss);
  cmd->add_option("--lora", opts->request.lora_path,
                  "a PEFT LoRA adapter folder: the adapters applied (without dropout), the base "
                  "frozen; with --training the gradients are the adapters'");
  cmd->add_flag(
      "--trust-artifact", opts->trust_artifact,
      "run an artifact whose signer is not trusted (kiln keys trust KEY trusts it for good)");
  cmd->add_flag("--reference", opts->reference,
                "run the reference interpreter instead of the compiled kernels");
  cmd->add_option("--profile", opts->profile_dir,
                  "time every kernel into DIR: op_summary.csv, op_statistic.csv, fusion_op.csv, "
                  "step_trace.csv, trace.json (as msprof writes them)");
  addJobFlags(*cmd, opts->job);
  addKernelFlags(*cmd, opts->cache);
  cmd->callback([opts, cmd, &action] { action = [opts, cmd] { return runRun(*opts, *cmd); }; });
  suggestOnUnknownArguments(*cmd);
}

} // namespace kiln::cli
