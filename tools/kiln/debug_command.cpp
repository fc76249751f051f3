// `kiln debug`: tools for the failures that cost days to guess at —
// `compare` finds the first value where two runs part ways, `bisect` the
// pass responsible; `overflow` and `reduce` have files of their own.
#include <iostream>

#include "compiler/driver/compile.h"
#include "compiler/driver/kernels.h"
#include "compiler/driver/reference_run.h"
#include "debug/bisect_job.h"
#include "debug/compare_job.h"
#include "tools/kiln/cli_common.h"
#include "tools/kiln/job_flags.h"
#include "tools/kiln/loss_flags.h"
#include "tools/kiln/model_run_flags.h"

namespace kiln::cli {
namespace {

// Prints a debug report as text or as JSON.
template <typename Report> int print(const std::string &format, const Report &report) {
  if (format == "json")
    std::cout << report.toJson().dump(2) << "\n";
  else
    printText(report.toText());
  return 0;
}

struct CompareOptions {
  debug::CompareJobRequest request;
  JobFlags job;
  size_t top = 10;
  std::string format = "text";
};

int runCompare(const CompareOptions &opts) {
  const driver::ReferenceRunRequest &run = opts.request.run;
  if (int rc = checkModelRunFlags(run.model, run.weights_path, run.training, run.loss); rc != 0)
    return rc;
  auto job = resolveJobFlags(opts.job, driver::kDefaultModelDType);
  if (!job)
    return fail(job.error());
  auto report = debug::compareJob(opts.request, *job);
  if (!report)
    return fail(report.error());
  if (opts.format == "json")
    std::cout << report->toJson().dump(2) << "\n";
  else
    printText(report->toText(opts.top));
  return 0;
}

void registerCompare(CLI::App &debug, Action &action) {
  auto opts = std::make_shared<CompareOptions>();
  CLI::App *cmd = debug.add_subcommand(
      "compare", "Compare the compiled kernels with the reference interpreter (or the fused "
                 "graph with the unfused one) value by value; name the first that diverges");
  addModelRunFlags(*cmd, opts->request.run);
  cmd->add_option("--against", opts->request.against,
                  "reference (compiled kernels vs the interpreter) or unfused (the job's fused "
                  "graph vs every fusion switched off, both on the interpreter)")
      ->check(OneOf({"reference", "unfused"}));
  cmd->add_option("--tol", opts->request.tolerance,
                  "relative and absolute tolerance (default by dtype: f32 1e-4, f16 1e-2, "
                  "bf16 5e-2)")
      ->check(FiniteNonNegative);
  cmd->add_option("--top", opts->top, "how many of the largest errors to list")
      ->check(NonNegativeInteger);
  cmd->add_option("--format", opts->format, "text or json")->check(OneOf({"text", "json"}));
  addJobFlags(*cmd, opts->job);
  addKernelFlags(*cmd, opts->request.cache);
  cmd->callback([opts, &action] { action = [opts] { return runCompare(*opts); }; });
}

struct BisectOptions {
  debug::BisectJobRequest request;
  JobFlags job;
  std::string check = "compile";
  std::string format = "text";
};

int runBisect(const BisectOptions &opts) {
  debug::BisectJobRequest request = opts.request;
  request.accuracy = opts.check == "accuracy";
  const driver::ModelRequest &model = request.model;
  if (request.accuracy) {
    if (request.inputs.empty())
      return usage("--check accuracy runs the model: give --inputs (and --weights unless the "
                   "model is ONNX)");
    if (int rc = checkModelRunFlags(model.model, request.weights, model.training, model.loss);
        rc != 0)
      return rc;
  } else if (Status loss = checkLossFlag(model.model, model.training, model.loss); !loss) {
    return fail(loss.error());
  }
  auto job = resolveJobFlags(opts.job, driver::kDefaultModelDType);
  if (!job)
    return fail(job.error());
  auto result = debug::bisectJob(request, *job);
  if (!result)
    return fail(result.error());
  return print(opts.format, *result);
}

void registerBisect(CLI::App &debug, Action &action) {
  auto opts = std::make_shared<BisectOptions>();
  CLI::App *cmd = debug.add_subcommand(
      "bisect", "Find the pass or rule that causes a compile failure or an accuracy regression: "
                "by group, by pass, then by the N-th group it formed");
  addModelFlags(*cmd, opts->request.model);
  addLossFlag(*cmd, opts->request.model.loss);
  cmd->add_option("--check", opts->check,
                  "compile (default: the job's compile error) or accuracy (outputs beyond --tol "
                  "from the same run with every switchable pass off, or from that run under "
                  "force_fp32 when it is not finite)")
      ->check(OneOf({"compile", "accuracy"}));
  cmd->add_option("--tol", opts->request.tolerance, "relative and absolute tolerance for accuracy")
      ->check(FiniteNonNegative);
  cmd->add_option("--weights", opts->request.weights, "safetensors with the parameters (accuracy)");
  cmd->add_option("--inputs", opts->request.inputs, "safetensors with input_ids (accuracy)");
  cmd->add_option("--format", opts->format, "text or json")->check(OneOf({"text", "json"}));
  addJobFlags(*cmd, opts->job);
  addKernelFlags(*cmd, opts->request.cache);
  cmd->callback([opts, &action] { action = [opts] { return runBisect(*opts); }; });
}

} // namespace

void registerDebugCommand(CLI::App &app, Action &action) {
  CLI::App *debug = app.add_subcommand(
      "debug", "Find what breaks a compile or a run: overflow, compare, bisect, reduce");
  debug->require_subcommand(1);
  registerDebugOverflow(*debug, action);
  registerCompare(*debug, action);
  registerBisect(*debug, action);
  registerDebugReduce(*debug, action);
  suggestOnUnknownArguments(*debug);
}

} // namespace kiln::cli
