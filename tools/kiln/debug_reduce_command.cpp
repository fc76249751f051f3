// `kiln debug reduce`: shrink a model whose compile fails to a small graph
// that fails the same way, and write it out as a reproducer folder.
#include <iostream>

#include "debug/reduce_job.h"
#include "tools/kiln/cli_common.h"
#include "tools/kiln/job_flags.h"
#include "tools/kiln/loss_flags.h"

namespace kiln::cli {
namespace {

struct ReduceOptions {
  driver::ModelRequest model;
  JobFlags job;
  std::string output;
  int max_trials = 5000;
};

int runReduce(const ReduceOptions &opts) {
  if (Status loss = checkLossFlag(opts.model.model, opts.model.training, opts.model.loss); !loss)
    return fail(loss.error());
  auto job = resolveJobFlags(opts.job, driver::kDefaultModelDType);
  if (!job)
    return fail(job.error());
  auto reduced = debug::reduceJob(opts.model, *job, opts.output, opts.max_trials);
  if (!reduced)
    return fail(reduced.error());
  for (const std::string &line : reduced->log)
    printText("  " + line + "\n");
  std::cout << "reduced " << reduced->reduction << ", keeping " << reduced->signature.toString()
            << "\n"
            << "wrote " << opts.output << "/{graph.json,job.json,README.md}; reproduce with:\n"
            << "  cd " << opts.output << " && kiln compile graph.json --job job.json\n";
  return 0;
}

} // namespace

void registerDebugReduce(CLI::App &debug, Action &action) {
  auto opts = std::make_shared<ReduceOptions>();
  CLI::App *cmd = debug.add_subcommand(
      "reduce", "Shrink a model whose kernels cannot be built to a small graph that fails the "
                "same way (delta debugging) and write a reproducer folder");
  addModelFlags(*cmd, opts->model);
  addLossFlag(*cmd, opts->model.loss);
  cmd->add_option("-o,--output", opts->output,
                  "the reproducer folder: graph.json, job.json, README.md")
      ->required();
  cmd->add_option("--max-trials", opts->max_trials, "stop shrinking after this many trials")
      ->check(PositiveInteger);
  addJobFlags(*cmd, opts->job);
  cmd->callback([opts, &action] { action = [opts] { return runReduce(*opts); }; });
}

} // namespace kiln::cli
