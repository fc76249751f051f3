// `kiln compile`: build a model's graph and run a job's passes over it;
// write the rewritten graph and a report of what every pass did.
#include <iostream>

#include <nlohmann/json.hpp>

#include "compiler/driver/compile.h"
#include "ir/file_io.h"
#include "ir/graph_json.h"
#include "tools/kiln/cli_common.h"
#include "tools/kiln/job_flags.h"

namespace kiln::cli {
namespace {

struct CompileOptions {
  driver::ModelRequest model;
  JobFlags job;
  std::string report;
  std::string output;
};

int runCompile(const CompileOptions &opts) {
  auto job = resolveJobFlags(opts.job, DType::F16);
  if (!job)
    return fail(job.error());
  auto graph = driver::buildModelGraph(opts.model, job->dtype);
  if (!graph)
    return fail(graph.error());
  const size_t nodes_before = graph->numNodes();
  auto report = driver::compileGraph(*graph, *job, instrumentationOf(opts.job));
  if (!report)
    return fail(report.error());

  if (!opts.report.empty()) {
    Status s = writeFileAtomic(opts.report, passes::reportToJson(*report, *graph).dump(2) + "\n");
    if (!s)
      return fail(s.error());
  }
  if (!opts.output.empty()) {
    Status s = writeFileAtomic(opts.output, graphToJson(*graph).dump(1) + "\n");
    if (!s)
      return fail(s.error());
  }
  std::cout << "kiln: compiled '" << graph->name() << "' for " << job->target.name << " ("
            << dtypeName(job->dtype) << " model, "
            << passes::precisionModeName(job->context->precision().mode) << "): " << nodes_before
            << " nodes -> " << graph->numNodes() << " nodes, " << graph->groups().size()
            << " fused groups\n";
  for (const passes::PassRecord &r : report->passes) {
    if (!r.enabled || !r.not_applicable.empty() || r.result.effect_times == 0)
      continue;
    std::cout << "  " << r.name << ": match_times " << r.result.match_times << ", effect_times "
              << r.result.effect_times << "\n";
  }
  return 0;
}

} // namespace

void registerCompileCommand(CLI::App &app, Action &action) {
  auto opts = std::make_shared<CompileOptions>();
  CLI::App *cmd = app.add_subcommand("compile", "Compile a model with a job's passes");
  cmd->add_option("MODEL", opts->model.model,
                  "config.json, a folder holding it, or a kiln graph JSON")
      ->required();
  cmd->add_flag("--training", opts->model.training,
                "the whole training step: forward, loss, backward, AdamW");
  cmd->add_option("--batch", opts->model.batch, "batch size")->check(CLI::PositiveNumber);
  cmd->add_option("--seq", opts->model.seq, "sequence length (default: the config's seq_length)")
      ->check(CLI::PositiveNumber);
  addJobFlags(*cmd, opts->job);
  cmd->add_option("--report", opts->report,
                  "write what every pass did (fusion_result.json style) to FILE");
  cmd->add_option("-o,--output", opts->output, "write the rewritten graph (kiln graph JSON)");
  cmd->callback([opts, &action] { action = [opts] { return runCompile(*opts); }; });
}

} // namespace kiln::cli
