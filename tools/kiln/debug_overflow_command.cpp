// `kiln debug overflow`: finds the first op that overflows and re-runs the
// step with each candidate fix (debug/overflow_job.h).
#include <iostream>

#include "compiler/driver/kernels.h"
#include "compiler/driver/reference_run.h"
#include "debug/overflow_job.h"
#include "tools/kiln/cli_common.h"
#include "tools/kiln/job_flags.h"
#include "tools/kiln/model_run_flags.h"

namespace kiln::cli {
namespace {

struct OverflowOptions {
  debug::OverflowJobRequest request;
  JobFlags job;
  std::string format = "text";
};

int runOverflow(const OverflowOptions &opts) {
  const driver::ReferenceRunRequest &run = opts.request.run;
  if (int rc = checkModelRunFlags(run.model, run.weights_path, run.training, run.loss); rc != 0)
    return rc;
  auto job = resolveJobFlags(opts.job, driver::kDefaultModelDType);
  if (!job)
    return fail(job.error());
  auto report = debug::locateJobOverflow(opts.request, *job);
  if (!report)
    return fail(report.error());
  if (opts.format == "json")
    std::cout << report->toJson().dump(2) << "\n";
  else
    printText(report->toText());
  return report->found ? kExitOverflowFound : kExitOk;
}

} // namespace

void registerDebugOverflow(CLI::App &debug, Action &action) {
  auto opts = std::make_shared<OverflowOptions>();
  CLI::App *cmd = debug.add_subcommand(
      "overflow", "Run with the float status and a finite check after every kernel, name the "
                  "first op that overflows and verify fixes for it (exit code 3 when found)");
  addModelRunFlags(*cmd, opts->request.run);
  cmd->add_option("--dump-dir", opts->request.dump_dir,
                  "write the overflowing op's inputs and outputs here (safetensors)");
  cmd->add_option("--format", opts->format, "text or json")->check(OneOf({"text", "json"}));
  cmd->add_flag("!--no-verify", opts->request.verify,
                "only suggest fixes; do not re-run the step with each one");
  cmd->add_option("--fix-tolerance", opts->request.tolerance,
                  "a fix must give a loss within this relative distance of force_fp32's")
      ->check(FinitePositive);
  addJobFlags(*cmd, opts->job);
  addKernelFlags(*cmd, opts->request.cache);
  cmd->callback([opts, &action] { action = [opts] { return runOverflow(*opts); }; });
}

} // namespace kiln::cli
