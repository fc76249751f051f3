// `kiln compile`: build a model's graph, run a job's passes over it and
// compile its kernels (through the kernel cache), or read the whole compiled
// program back from the program cache; write the rewritten graph or an
// artifact (one bucket per --seq), and a report of what every pass did and
// what every kernel needed.
#include <iostream>

#include <nlohmann/json.hpp>

#include "compiler/driver/compile_run.h"
#include "support/file_io.h"
#include "support/printable_text.h"
#include "tools/kiln/cli_common.h"
#include "tools/kiln/job_flags.h"
#include "tools/kiln/lora_flags.h"
#include "tools/kiln/loss_flags.h"

namespace kiln::cli {
namespace {

struct CompileOptions {
  driver::ModelRequest model;
  JobFlags job;
  std::string report;
  std::vector<int64_t> seqs; // several: one artifact bucket each
  std::string output;
  driver::KernelSettings cache;
  bool passes_only = false;
};

Status writeReport(const std::string &path, const nlohmann::json &report) {
  KILN_ASSIGN_OR_RETURN(std::string text, jsonText(report, path, 2));
  return writeFileAtomic(path, text + "\n");
}

// A failed compile's report (what it got to, with the error) to `path` when given.
int failWithReport(const std::string &path, const nlohmann::json &report, const Error &error) {
  if (!path.empty() && !report.is_null())
    (void)writeReport(path, report);
  return fail(error);
}

void printSummary(const driver::ProgramCompile &c, const driver::ResolvedJob &job,
                  const std::string &seq) {
  const driver::ProgramSummary &s = c.program.summary;
  std::cout << "kiln: compiled '" << printableName(s.graph) << "'" << seq << " for "
            << job.target.name << " (" << driver::numericsSummary(job) << "): " << s.nodes_before
            << " nodes -> " << s.nodes << " nodes, " << s.groups << " fused groups\n";
  for (const driver::PassLine &p : s.passes)
    std::cout << "  " << printableName(p.name) << ": match_times " << p.match_times
              << ", effect_times " << p.effect_times << "\n";
  for (const passes::SettingMatch &m : s.settings) {
    std::string ops;
    for (const std::string &op : m.op_types)
      ops += (ops.empty() ? "" : ", ") + op;
    std::cout << "  " << m.setting << " " << printableName(m.entry)
              << (ops.empty() || m.setting == "attention_fp32_layers" ? "" : " (" + ops + ")")
              << ": " << m.nodes << (m.nodes == 1 ? " node" : " nodes") << "\n";
  }
  if (c.has_kernels) {
    const codegen::KernelStats &st = c.kernel_stats;
    std::cout << "  kernels: " << st.total << " (" << st.unique << " unique), " << st.compiled
              << " compiled, " << st.cache_hits << " from the cache"
              << (c.cache_dir.empty() ? "" : " " + c.cache_dir) << ", "
              << static_cast<int64_t>(st.seconds * 1000) << " ms\n";
  }
  if (c.from_cache)
    std::cout << "  program: from the cache (key " << c.program_key.substr(0, 12)
              << "): graph, passes and kernel plan not rebuilt\n";
}

// Signs and writes the artifact, and says what it holds.
int writeArtifact(const std::string &path, const artifact::Manifest &manifest,
                  std::vector<artifact::EncodedBucket> buckets) {
  auto signed_artifact = driver::signArtifact(manifest, std::move(buckets), path);
  if (!signed_artifact)
    return fail(signed_artifact.error());
  const driver::SignedArtifact &a = *signed_artifact;
  Status s = writeFileAtomic(path, a.bytes);
  if (!s)
    return fail(s.error());
  std::string seq_list;
  for (int64_t seq : a.seqs)
    seq_list += (seq_list.empty() ? "" : ", ") + std::to_string(seq);
  std::cout << "kiln: wrote " << path << ": " << a.buckets << " bucket"
            << (a.buckets == 1 ? "" : "s") << " (seq " << seq_list << "), " << a.kernels
            << " kernels, " << a.objects << " objects, " << a.bytes.size()
            << " bytes, signed by key " << a.key_fingerprint << "\n";
  return 0;
}

int runCompile(const CompileOptions &opts) {
  const bool to_artifact = opts.output.ends_with(".kiln");
  if (Status checked =
          driver::checkCompileLengths(opts.seqs, to_artifact, opts.passes_only, opts.output);
      !checked)
    return fail(usageError(checked.error()));
  if (Status loss = checkLossFlag(opts.model.model, opts.model.training, opts.model.loss); !loss)
    return fail(loss.error());
  auto job = resolveJobFlags(opts.job, driver::kDefaultModelDType);
  if (!job)
    return failWithReport(opts.report, driver::reportWithError(nullptr, job.error()), job.error());

  driver::CompileRunRequest request;
  request.program.model = opts.model;
  request.program.kernels = opts.cache;
  request.program.instrumentation = instrumentationOf(opts.job);
  request.program.passes_only = opts.passes_only;
  request.program.for_artifact = to_artifact;
  request.seqs = opts.seqs;
  request.report = !opts.report.empty();
  request.artifact = opts.output;
  const bool several = opts.seqs.size() > 1;
  driver::CompileRun run;
  Status compiled =
      driver::compileRun(request, *job, run, [&](const driver::ProgramCompile &c, int64_t seq) {
        for (const std::string &line : c.miss_explanations)
          note("cache miss: " + line);
        if (!c.fallbacks.empty())
          note(codegen::fallbackSummary(c.fallbacks));
        printSummary(c, *job, several ? " at seq " + std::to_string(seq) : "");
        if (to_artifact || opts.output.empty())
          return Status::ok();
        auto text = c.graphJson();
        return text ? writeFileAtomic(opts.output, *text + "\n") : Status(text.error());
      });
  if (!compiled)
    return failWithReport(opts.report, run.report, compiled.error());
  if (!opts.report.empty()) {
    Status s = writeReport(opts.report, run.report);
    if (!s)
      return fail(s.error());
  }
  if (run.manifest)
    return writeArtifact(opts.output, *run.manifest, std::move(run.buckets));
  return 0;
}

} // namespace

void registerCompileCommand(CLI::App &app, Action &action) {
  auto opts = std::make_shared<CompileOptions>();
  CLI::App *cmd = app.add_subcommand("compile", "Compile a model with a job's passes");
  addModelArgument(*cmd, opts->model.model, ModelArgument::AnyModel);
  cmd->add_flag("--training", opts->model.training,
                "the whole training step: forward, loss, backward, AdamW");
  addLossFlag(*cmd, opts->model.loss);
  cmd->add_option("--batch", opts->model.batch, "batch size")->check(PositiveInteger);
  addInputShapeFlag(*cmd, opts->model.input_shapes);
  addLoraShapeFlags(*cmd, opts->model.lora);
  cmd->add_option("--seq", opts->seqs,
                  "sequence length (default: the config's seq_length); with -o FILE.kiln a list "
                  "S1,S2,... compiles one bucket per length into the artifact")
      ->delimiter(',')
      ->check(PositiveInteger);
  addJobFlags(*cmd, opts->job);
  cmd->add_option("--report", opts->report,
                  "write what every pass did (fusion_result.json style) to FILE");
  cmd->add_option("-o,--output", opts->output,
                  "FILE.kiln: write an artifact that kiln run runs without compiling; any other "
                  "name: write the rewritten graph (kiln graph JSON)");
  cmd->add_flag("--passes-only", opts->passes_only,
                "run the passes but compile no kernels (nothing is checked against the target's "
                "buffers)");
  addKernelFlags(*cmd, opts->cache);
  suggestOnUnknownArguments(*cmd);
  cmd->callback([opts, &action] { action = [opts] { return runCompile(*opts); }; });
}

} // namespace kiln::cli
