// `kiln compile`: build a model's graph, run a job's passes over it and
// compile its kernels (through the kernel cache), or read the whole compiled
// program back from the program cache; write the rewritten graph or an
// artifact (one bucket per --seq), and a report of what every pass did and
// what every kernel needed.
#include <algorithm>
#include <iostream>
#include <set>

#include <nlohmann/json.hpp>

#include "compiler/artifact/artifact.h"
#include "compiler/driver/job_json.h"
#include "compiler/driver/program_compile.h"
#include "support/file_io.h"
#include "support/printable_text.h"
#include "tools/kiln/cli_common.h"
#include "tools/kiln/job_flags.h"
#include "tools/kiln/lora_flags.h"

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

// A failed compile's report: `report` (what it got to, may be null) with
// the error, its code and location apart, for scripts.
int failWithReport(const std::string &path, nlohmann::json report, const Error &error) {
  if (!path.empty()) {
    nlohmann::json e = {{"message", error.message()}};
    if (!error.code().empty())
      e["code"] = error.code();
    if (!error.location().empty())
      e["location"] = error.location();
    report["error"] = std::move(e);
    (void)writeReport(path, report);
  }
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
  // What the artifact holds, for the line that names it.
  size_t kernels = 0;
  std::set<std::string> objects;
  std::vector<int64_t> bucket_seqs;
  for (const artifact::EncodedBucket &b : buckets) {
    kernels += static_cast<size_t>(b.kernels);
    bucket_seqs.push_back(b.seq);
    for (const artifact::ArtifactObject &o : b.objects)
      objects.insert(o.key);
  }
  std::sort(bucket_seqs.begin(), bucket_seqs.end());
  std::string seq_list;
  for (int64_t s : bucket_seqs)
    seq_list += (seq_list.empty() ? "" : ", ") + std::to_string(s);
  auto key = artifact::SigningKey::loadOrCreate();
  if (!key)
    return fail(key.error());
  const size_t buckets_written = buckets.size();
  auto bytes = artifact::encodeArtifact(manifest, std::move(buckets), *key);
  if (!bytes)
    return fail(bytes.error().withContext(path));
  Status s = writeFileAtomic(path, *bytes);
  if (!s)
    return fail(s.error());
  std::cout << "kiln: wrote " << path << ": " << buckets_written << " bucket"
            << (buckets_written == 1 ? "" : "s") << " (seq " << seq_list << "), " << kernels
            << " kernels, " << objects.size() << " objects, " << bytes->size()
            << " bytes, signed by key " << artifact::keyFingerprint(key->publicKey()) << "\n";
  return 0;
}

int runCompile(const CompileOptions &opts) {
  const bool to_artifact = opts.output.ends_with(".kiln");
  std::vector<int64_t> seqs = opts.seqs.empty() ? std::vector<int64_t>{0} : opts.seqs;
  for (size_t i = 0; i < seqs.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (seqs[i] == seqs[j])
        return usage("--seq lists " + std::to_string(seqs[i]) + " twice");
  if (seqs.size() > 1 && !to_artifact)
    return usage("--seq lists " + std::to_string(seqs.size()) +
                 " sequence lengths: only an artifact holds several (write one with -o FILE.kiln)");
  if (to_artifact && opts.passes_only)
    return usage("--passes-only compiles no kernels, but an artifact (" + opts.output +
                 ") holds them; drop one of the two");
  auto job = resolveJobFlags(opts.job, driver::kDefaultModelDType);
  if (!job)
    return failWithReport(opts.report, nlohmann::json::object(), job.error());

  std::vector<artifact::EncodedBucket> buckets;
  std::optional<artifact::Manifest> manifest;
  nlohmann::json reports = nlohmann::json::array();
  auto reportOf = [&] {
    return seqs.size() == 1 ? reports.back() : nlohmann::json{{"buckets", reports}};
  };
  for (int64_t seq : seqs) {
    driver::ProgramRequest request;
    request.model = opts.model;
    request.model.seq = seq;
    request.kernels = opts.cache;
    request.instrumentation = instrumentationOf(opts.job);
    request.passes_only = opts.passes_only;
    request.for_artifact = to_artifact;
    nlohmann::json failure_report;
    auto compiled = driver::compileProgram(request, *job, &failure_report);
    if (!compiled) {
      // The report still says which kernels failed, with every diagnostic.
      if (failure_report.is_null())
        failure_report = nlohmann::json::object();
      if (seqs.size() > 1)
        failure_report["seq"] = seq;
      reports.push_back(std::move(failure_report));
      return failWithReport(opts.report, reportOf(), compiled.error());
    }
    for (const std::string &line : compiled->miss_explanations)
      note("cache miss: " + line);
    if (!compiled->fallbacks.empty())
      note(codegen::fallbackSummary(compiled->fallbacks));
    if (!opts.report.empty()) {
      auto report = compiled->report();
      if (!report)
        return fail(report.error());
      if (seqs.size() > 1)
        (*report)["seq"] = seq;
      reports.push_back(std::move(*report));
    }
    printSummary(*compiled, *job, seqs.size() > 1 ? " at seq " + std::to_string(seq) : "");
    if (to_artifact) {
      if (compiled->program.bucket.text.empty())
        return fail(opts.output + ": " + compiled->bucket_error);
      if (!manifest) {
        codegen::ObjectOptions object; // as driver::compileJobKernels compiles
        object.overflow = job->overflow;
        manifest = driver::makeManifest(*job, object,
                                        {opts.model.model, compiled->program.summary.graph,
                                         opts.model.training, compiled->program.bucket.batch});
      }
      buckets.push_back(std::move(compiled->program.bucket));
    } else if (!opts.output.empty()) {
      auto text = compiled->graphJson();
      Status s = text ? writeFileAtomic(opts.output, *text + "\n") : Status(text.error());
      if (!s)
        return fail(s.error());
    }
  }
  if (!opts.report.empty()) {
    Status s = writeReport(opts.report, reportOf());
    if (!s)
      return fail(s.error());
  }
  if (manifest)
    return writeArtifact(opts.output, *manifest, std::move(buckets));
  return 0;
}

} // namespace

void registerCompileCommand(CLI::App &app, Action &action) {
  auto opts = std::make_shared<CompileOptions>();
  CLI::App *cmd = app.add_subcommand("compile", "Compile a model with a job's passes");
  addModelArgument(*cmd, opts->model.model, ModelArgument::AnyModel);
  cmd->add_flag("--training", opts->model.training,
                "the whole training step: forward, loss, backward, AdamW");
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
