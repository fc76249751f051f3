// `kiln plan`: which layout of N devices trains a model, planned by the same
// compiler and memory planner as `kiln train --compile-only` and ranked by
// the target's cost model; the kiln train command for the best, or when
// nothing fits, what would.
#include <iostream>

#include "compiler/driver/layout_plan_report.h"
#include "compiler/frontend/decoder_model.h"
#include "tools/kiln/cli_common.h"
#include "tools/kiln/job_flags.h"
#include "tools/kiln/lora_flags.h"

namespace kiln::cli {
namespace {

struct PlanOptions {
  driver::PlanRequest request;
  JobFlags job;
  driver::KernelSettings kernels;
  frontend::LoraConfig lora;
  std::string device_memory, format = "text";
  int top = 5;
};

int runPlan(PlanOptions opts) {
  auto job = resolveJobFlags(opts.job, driver::kDefaultModelDType);
  if (!job)
    return fail(job.error());
  driver::PlanRequest &r = opts.request;
  if (!opts.device_memory.empty()) {
    auto bytes = parseSizeFlag("--device-memory", opts.device_memory);
    if (!bytes)
      return fail(bytes.error());
    r.device_memory = *bytes;
    r.device_memory_written = opts.device_memory;
  }
  auto config = decoderConfigOf(r.model.model, "kiln plan");
  if (!config)
    return fail(config.error());
  if (r.model.seq == 0)
    r.model.seq = config->seq_length;
  if (opts.lora.rank > 0) {
    if (Status ok = frontend::validateLoraConfig(opts.lora, "--lora-rank"); !ok)
      return fail(usageError(ok.error()));
    r.model.lora = frontend::withDefaultTargets(*config, opts.lora);
  }
  // A recomputation mode the job gives is the only one planned.
  const driver::JobSpec &spec = job->spec;
  r.recompute = spec.flags.recompute ? spec.flags.recompute
                : spec.file          ? spec.file->recompute
                                     : std::nullopt;
  auto plan = driver::planLayouts(r, *job, opts.kernels);
  if (!plan)
    return fail(plan.error());
  if (opts.format == "json")
    std::cout << driver::layoutPlanToJson(r, *job, *plan).dump(2) << "\n";
  else
    std::cout << driver::layoutPlanToText(r, *job, *plan, opts.top);
  return plan->recommended() ? kExitOk : kExitDoesNotFit;
}

} // namespace

void registerPlanCommand(CLI::App &app, Action &action) {
  auto opts = std::make_shared<PlanOptions>();
  CLI::App *cmd = app.add_subcommand(
      "plan", "Find the layouts of N devices that fit a decoder training job, ranked by predicted "
              "tokens/s per device, and the kiln train command for the best");
  driver::PlanRequest &r = opts->request;
  addModelArgument(*cmd, r.model.model, ModelArgument::Decoder);
  cmd->add_option("--devices", r.devices, "devices in all (default 8)")
      ->check(IntegerIn(1, parallel::kMaxDevices));
  cmd->add_option("--nodes", r.nodes,
                  "nodes they sit in (default: devices over the target's devices per node)")
      ->check(PositiveInteger);
  cmd->add_option("--device-memory", opts->device_memory,
                  "memory of each device, e.g. 32GiB (default: the target's HBM)")
      ->check(ByteSize);
  r.model.batch = 0;
  cmd->add_option("--global-batch", r.model.batch, "sequences per step, over all replicas")
      ->required()
      ->check(PositiveInteger);
  cmd->add_option("--seq", r.model.seq, "sequence length (default: the config's)")
      ->check(PositiveInteger);
  cmd->add_option("--lora-rank", opts->lora.rank,
                  "plan a LoRA fine-tune of this rank (the family's default targets)")
      ->check(PositiveInteger);
  cmd->add_option("--format", opts->format, "text or json")->check(OneOf({"text", "json"}));
  cmd->add_option("--top", opts->top,
                  "layouts to show of those that fit and those that do not "
                  "(default 5)")
      ->check(PositiveInteger);
  addJobFlags(*cmd, opts->job);
  cmd->callback([opts, &action] { action = [opts] { return runPlan(*opts); }; });
  suggestOnUnknownArguments(*cmd);
}

} // namespace kiln::cli
