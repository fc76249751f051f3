// `kiln debug`: tools for the failures that cost days to guess at —
// `overflow` names the first kernel and op that produce inf or NaN, `compare`
// finds the first value where two runs part ways.
#include <iostream>

#include "compiler/driver/kernels.h"
#include "compiler/driver/reference_run.h"
#include "debug/overflow_locator.h"
#include "debug/value_compare.h"
#include "tools/kiln/cli_common.h"
#include "tools/kiln/job_flags.h"

namespace kiln::cli {
namespace {

void addModelRunFlags(CLI::App &cmd, driver::ReferenceRunRequest &request);

struct OverflowOptions {
  driver::ReferenceRunRequest request;
  JobFlags job;
  driver::KernelCacheSettings cache;
  std::string dump_dir;
  std::string format = "text";
};

int runOverflow(const OverflowOptions &opts) {
  auto job = resolveJobFlags(opts.job, DType::F32);
  if (!job)
    return fail(job.error());
  driver::ReferenceRunRequest request = opts.request;
  request.job = &*job;
  auto run = driver::prepareModelRun(request);
  if (!run)
    return fail(run.error());
  auto kernels = driver::compileJobKernels(run->graph, *job, opts.cache);
  if (!kernels)
    return fail(kernels.error());
  debug::OverflowOptions options;
  options.dump_dir = opts.dump_dir;
  auto report = debug::locateOverflow(run->graph, std::move(kernels->kernels), run->inputs,
                                      debug::overflowJobOf(*job), options);
  if (!report)
    return fail(report.error());
  if (opts.format == "json")
    std::cout << report->toJson().dump(2) << "\n";
  else
    std::cout << report->toText();
  return 0;
}

void registerOverflow(CLI::App &debug, Action &action) {
  auto opts = std::make_shared<OverflowOptions>();
  CLI::App *cmd = debug.add_subcommand(
      "overflow", "Run with a finite check after every kernel and name the first op that "
                  "produces inf or NaN");
  addModelRunFlags(*cmd, opts->request);
  cmd->add_option("--dump-dir", opts->dump_dir,
                  "write the overflowing op's inputs and outputs here (safetensors)");
  cmd->add_option("--format", opts->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  addJobFlags(*cmd, opts->job);
  addKernelCacheFlags(*cmd, opts->cache);
  cmd->callback([opts, &action] { action = [opts] { return runOverflow(*opts); }; });
}

struct CompareOptions {
  driver::ReferenceRunRequest request;
  JobFlags job;
  driver::KernelCacheSettings cache;
  std::string against = "reference";
  double tolerance = -1;
  size_t top = 10;
  std::string format = "text";
};

// The job with every fusion pass and rule it may switch off switched off.
Expected<driver::ResolvedJob> unfusedJob(const JobFlags &flags, const driver::ResolvedJob &fused) {
  JobFlags unfused = flags;
  for (const passes::Pass *p : fused.registry->ordered()) {
    const passes::PassInfo &info = p->info();
    if ((info.group != passes::PassGroup::GraphFusion &&
         info.group != passes::PassGroup::UBFusion) ||
        !info.may_disable)
      continue;
    std::erase(unfused.settings.enable_passes, info.name);
    unfused.settings.disable_passes.push_back(info.name);
  }
  return resolveJobFlags(unfused, DType::F32);
}

int runCompare(const CompareOptions &opts) {
  auto job = resolveJobFlags(opts.job, DType::F32);
  if (!job)
    return fail(job.error());
  driver::ReferenceRunRequest request = opts.request;
  request.job = &*job;
  auto run = driver::prepareModelRun(request);
  if (!run)
    return fail(run.error());
  const double tolerance = opts.tolerance >= 0        ? opts.tolerance
                           : job->dtype == DType::F32 ? 1e-4
                           : job->dtype == DType::F16 ? 1e-2
                                                      : 5e-2;
  Expected<debug::ValueTrace> got = Error("not run"), want = Error("not run");
  if (opts.against == "reference") {
    auto kernels = driver::compileJobKernels(run->graph, *job, opts.cache);
    if (!kernels)
      return fail(kernels.error());
    got = debug::traceCompiled(run->graph, std::move(kernels->kernels), run->inputs);
    want = debug::traceReference(run->graph, run->inputs, run->overflow);
  } else {
    auto plain = unfusedJob(opts.job, *job);
    if (!plain)
      return fail(plain.error());
    driver::ReferenceRunRequest plain_request = opts.request;
    plain_request.job = &*plain;
    auto plain_run = driver::prepareModelRun(plain_request);
    if (!plain_run)
      return fail(plain_run.error());
    got = debug::traceReference(run->graph, run->inputs, run->overflow);
    want = debug::traceReference(plain_run->graph, plain_run->inputs, plain_run->overflow);
  }
  if (!got)
    return fail(got.error());
  if (!want)
    return fail(want.error());
  debug::CompareReport report = debug::compareTraces(run->graph, *got, *want, tolerance);
  report.against = opts.against;
  if (opts.format == "json")
    std::cout << report.toJson().dump(2) << "\n";
  else
    std::cout << report.toText(opts.top);
  return 0;
}

// MODEL, --weights, --inputs and --training, as kiln run takes them.
void addModelRunFlags(CLI::App &cmd, driver::ReferenceRunRequest &request) {
  cmd.add_option("MODEL", request.model, "config.json, a folder holding it, or a kiln graph JSON")
      ->required();
  cmd.add_option("--weights", request.weights_path, "safetensors with the parameters")->required();
  cmd.add_option("--inputs", request.inputs_path,
                 "safetensors with input_ids (i64 [B,S]) and optional labels")
      ->required();
  cmd.add_flag("--training", request.training, "forward and backward");
}

void registerCompare(CLI::App &debug, Action &action) {
  auto opts = std::make_shared<CompareOptions>();
  CLI::App *cmd = debug.add_subcommand(
      "compare", "Compare the compiled kernels with the reference interpreter (or the fused "
                 "graph with the unfused one) value by value; name the first that diverges");
  addModelRunFlags(*cmd, opts->request);
  cmd->add_option("--against", opts->against,
                  "reference (compiled kernels vs the interpreter) or unfused (the job's fused "
                  "graph vs every fusion switched off, both on the interpreter)")
      ->check(CLI::IsMember({"reference", "unfused"}));
  cmd->add_option("--tol", opts->tolerance,
                  "relative and absolute tolerance (default by dtype: f32 1e-4, f16 1e-2, "
                  "bf16 5e-2)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--top", opts->top, "how many of the largest errors to list");
  cmd->add_option("--format", opts->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  addJobFlags(*cmd, opts->job);
  addKernelCacheFlags(*cmd, opts->cache);
  cmd->callback([opts, &action] { action = [opts] { return runCompare(*opts); }; });
}

} // namespace

void registerDebugCommand(CLI::App &app, Action &action) {
  CLI::App *debug = app.add_subcommand("debug", "Find what breaks a run: overflow, compare");
  debug->require_subcommand(1);
  registerOverflow(*debug, action);
  registerCompare(*debug, action);
}

} // namespace kiln::cli
