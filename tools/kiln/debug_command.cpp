// `kiln debug`: tools for the failures that cost days to guess at —
// `overflow` names the first kernel and op that produce inf or NaN.
#include <iostream>

#include "compiler/driver/kernels.h"
#include "compiler/driver/reference_run.h"
#include "debug/overflow_locator.h"
#include "tools/kiln/cli_common.h"
#include "tools/kiln/job_flags.h"

namespace kiln::cli {
namespace {

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
  cmd->add_option("MODEL", opts->request.model,
                  "config.json, a folder holding it, or a kiln graph JSON")
      ->required();
  cmd->add_option("--weights", opts->request.weights_path, "safetensors with the parameters")
      ->required();
  cmd->add_option("--inputs", opts->request.inputs_path,
                  "safetensors with input_ids (i64 [B,S]) and optional labels")
      ->required();
  cmd->add_flag("--training", opts->request.training, "forward and backward");
  cmd->add_option("--dump-dir", opts->dump_dir,
                  "write the overflowing op's inputs and outputs here (safetensors)");
  cmd->add_option("--format", opts->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  addJobFlags(*cmd, opts->job);
  addKernelCacheFlags(*cmd, opts->cache);
  cmd->callback([opts, &action] { action = [opts] { return runOverflow(*opts); }; });
}

} // namespace

void registerDebugCommand(CLI::App &app, Action &action) {
  CLI::App *debug =
      app.add_subcommand("debug", "Find what breaks a compile or a run: overflow, ...");
  debug->require_subcommand(1);
  registerOverflow(*debug, action);
}

} // namespace kiln::cli
