// `kiln compile`: build a model's graph, run a job's passes over it and
// compile its kernels (through the kernel cache); write the rewritten graph
// and a report of what every pass did and what every kernel needed.
#include <iostream>

#include <nlohmann/json.hpp>

#include "compiler/driver/compile.h"
#include "compiler/driver/kernels.h"
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
  driver::KernelCacheSettings cache;
  bool passes_only = false;
};

nlohmann::json kernelsToJson(const codegen::CompiledKernels &compiled) {
  nlohmann::json list = nlohmann::json::array();
  for (const codegen::CompiledKernel &k : compiled.kernels) {
    nlohmann::json entry = {{"name", k.spec.name},
                            {"kind", k.spec.kind},
                            {"key", k.key},
                            {"members", k.spec.members.size()},
                            {"ub_bytes", k.tiling.ub_bytes},
                            {"vector_tile_elements", k.tiling.vector_tile_elements}};
    if (!k.spec.formed_by.empty())
      entry["formed_by"] = k.spec.formed_by;
    if (k.build.gemm) {
      entry["cube_out_tile"] = k.tiling.cube_out_tile;
      entry["l0c_bytes"] = k.tiling.l0c_bytes;
    }
    list.push_back(std::move(entry));
  }
  nlohmann::json j = compiled.stats.toJson();
  j["list"] = std::move(list);
  return j;
}

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

  nlohmann::json report_json = passes::reportToJson(*report, *graph);
  std::optional<driver::JobKernels> kernels;
  codegen::KernelCompileFailure failure;
  if (!opts.passes_only) {
    auto compiled = driver::compileJobKernels(*graph, *job, opts.cache, &failure);
    if (!compiled && !failure.diagnostics.empty()) {
      // The report still says what failed, with every diagnostic.
      nlohmann::json errors = nlohmann::json::array();
      for (const codegen::KernelDiagnostic &d : failure.diagnostics)
        errors.push_back(d.toJson());
      report_json["errors"] = std::move(errors);
      if (!opts.report.empty())
        (void)writeFileAtomic(opts.report, report_json.dump(2) + "\n");
    }
    if (!compiled)
      return fail(compiled.error());
    kernels = std::move(*compiled);
    report_json["kernels"] = kernelsToJson(kernels->kernels);
    for (const std::string &line : kernels->kernels.miss_explanations)
      std::cerr << "kiln: cache miss: " << line << "\n";
  }
  if (!opts.report.empty()) {
    Status s = writeFileAtomic(opts.report, report_json.dump(2) + "\n");
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
  if (kernels) {
    const codegen::KernelStats &st = kernels->kernels.stats;
    std::cout << "  kernels: " << st.total << " (" << st.unique << " unique), " << st.compiled
              << " compiled, " << st.cache_hits << " from the cache"
              << (kernels->cache_dir.empty() ? "" : " " + kernels->cache_dir) << ", "
              << static_cast<int64_t>(st.seconds * 1000) << " ms\n";
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
  cmd->add_flag("--passes-only", opts->passes_only,
                "run the passes but compile no kernels (nothing is checked against the target's "
                "buffers)");
  addKernelCacheFlags(*cmd, opts->cache);
  cmd->callback([opts, &action] { action = [opts] { return runCompile(*opts); }; });
}

} // namespace kiln::cli
