// `kiln compile`: build a model's graph, run a job's passes over it and
// compile its kernels (through the kernel cache); write the rewritten graph
// or an artifact (one bucket per --seq), and a report of what every pass did
// and what every kernel needed.
#include <iostream>

#include <nlohmann/json.hpp>

#include "compiler/artifact/artifact_builder.h"
#include "compiler/driver/compile.h"
#include "compiler/driver/kernels.h"
#include "ir/file_io.h"
#include "ir/graph_json.h"
#include "ir/printable_text.h"
#include "tools/kiln/cli_common.h"
#include "tools/kiln/job_flags.h"

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

// One sequence length compiled: the graph after the passes, what the passes
// did and the kernels.
struct CompiledSeq {
  Graph graph;
  size_t nodes_before = 0;
  passes::PipelineReport report;
  std::optional<driver::JobKernels> kernels;
};

bool endsWith(const std::string &s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void writeReport(const std::string &path, const nlohmann::json &report) {
  if (!path.empty())
    (void)writeFileAtomic(path, report.dump(2) + "\n");
}

// Builds and compiles the model at `seq` (0: the config's). On a failed
// kernel compile `report_json` still says what failed, with every diagnostic.
Expected<CompiledSeq> compileSeq(const CompileOptions &opts, const driver::ResolvedJob &job,
                                 int64_t seq, nlohmann::json &report_json) {
  driver::ModelRequest request = opts.model;
  request.seq = seq;
  CompiledSeq out;
  KILN_ASSIGN_OR_RETURN(out.graph, driver::buildModelGraph(request, job.dtype));
  out.nodes_before = out.graph.numNodes();
  KILN_ASSIGN_OR_RETURN(out.report,
                        driver::compileGraph(out.graph, job, instrumentationOf(opts.job)));
  report_json = passes::reportToJson(out.report, out.graph);
  if (opts.passes_only)
    return out;
  codegen::KernelCompileFailure failure;
  auto compiled = driver::compileJobKernels(out.graph, job, opts.cache, &failure);
  if (!compiled && !failure.diagnostics.empty()) {
    nlohmann::json errors = nlohmann::json::array();
    for (const codegen::KernelDiagnostic &d : failure.diagnostics)
      errors.push_back(d.toJson());
    report_json["errors"] = std::move(errors);
  }
  if (!compiled)
    return compiled.error();
  out.kernels = std::move(*compiled);
  report_json["kernels"] = kernelsToJson(out.kernels->kernels);
  for (const std::string &line : out.kernels->kernels.miss_explanations)
    note("cache miss: " + line);
  if (!out.kernels->kernels.fallbacks.empty()) {
    note(codegen::fallbackSummary(out.kernels->kernels.fallbacks));
    nlohmann::json fallbacks = nlohmann::json::array();
    for (const codegen::KernelFallback &f : out.kernels->kernels.fallbacks)
      fallbacks.push_back(f.toJson());
    report_json["fallbacks"] = std::move(fallbacks);
  }
  return out;
}

void printSummary(const CompiledSeq &c, const driver::ResolvedJob &job, const std::string &seq) {
  std::cout << "kiln: compiled '" << printableName(c.graph.name()) << "'" << seq << " for "
            << job.target.name << " (" << dtypeName(job.dtype) << " model, "
            << passes::precisionModeName(job.context->precision().mode) << "): " << c.nodes_before
            << " nodes -> " << c.graph.numNodes() << " nodes, " << c.graph.groups().size()
            << " fused groups\n";
  for (const passes::PassRecord &r : c.report.passes) {
    if (!r.enabled || !r.not_applicable.empty() || r.result.effect_times == 0)
      continue;
    std::cout << "  " << printableName(r.name) << ": match_times " << r.result.match_times
              << ", effect_times " << r.result.effect_times << "\n";
  }
  for (const passes::SettingMatch &m : c.report.settings) {
    std::string ops;
    for (const std::string &op : m.op_types)
      ops += (ops.empty() ? "" : ", ") + op;
    std::cout << "  " << m.setting << " " << printableName(m.entry)
              << (ops.empty() || m.setting == "attention_fp32_layers" ? "" : " (" + ops + ")")
              << ": " << m.nodes << (m.nodes == 1 ? " node" : " nodes") << "\n";
  }
  if (c.kernels) {
    const codegen::KernelStats &st = c.kernels->kernels.stats;
    std::cout << "  kernels: " << st.total << " (" << st.unique << " unique), " << st.compiled
              << " compiled, " << st.cache_hits << " from the cache"
              << (c.kernels->cache_dir.empty() ? "" : " " + c.kernels->cache_dir) << ", "
              << static_cast<int64_t>(st.seconds * 1000) << " ms\n";
  }
}

int runCompile(const CompileOptions &opts) {
  const bool to_artifact = endsWith(opts.output, ".kiln");
  std::vector<int64_t> seqs = opts.seqs.empty() ? std::vector<int64_t>{0} : opts.seqs;
  for (size_t i = 0; i < seqs.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (seqs[i] == seqs[j])
        return fail("--seq lists " + std::to_string(seqs[i]) + " twice");
  if (seqs.size() > 1 && !to_artifact)
    return fail("--seq lists " + std::to_string(seqs.size()) +
                " sequence lengths: only an artifact holds several (write one with -o FILE.kiln)");
  if (to_artifact && opts.passes_only)
    return fail("--passes-only compiles no kernels, but an artifact (" + opts.output +
                ") holds them; drop one of the two");
  auto job = resolveJobFlags(opts.job, DType::F16);
  if (!job)
    return fail(job.error());

  std::optional<artifact::ArtifactBuilder> builder;
  nlohmann::json reports = nlohmann::json::array();
  for (int64_t seq : seqs) {
    nlohmann::json report_json;
    auto compiled = compileSeq(opts, *job, seq, report_json);
    if (seqs.size() > 1 && !report_json.is_null())
      report_json["seq"] = seq;
    if (!report_json.is_null())
      reports.push_back(std::move(report_json));
    if (!compiled) {
      // The report still says which kernels failed, with every diagnostic.
      if (!reports.empty() && reports.back().contains("errors"))
        writeReport(opts.report,
                    seqs.size() == 1 ? reports.back() : nlohmann::json{{"buckets", reports}});
      return fail(compiled.error());
    }
    printSummary(*compiled, *job, seqs.size() > 1 ? " at seq " + std::to_string(seq) : "");
    if (to_artifact) {
      const auto shape = artifact::tokenShape(compiled->graph);
      const int64_t batch = shape ? shape->first : opts.model.batch;
      const int64_t bucket_seq = shape ? shape->second : seq;
      if (!builder) {
        codegen::ObjectOptions object; // as driver::compileJobKernels compiles
        object.overflow = job->overflow;
        builder.emplace(artifact::makeManifest(
            *job, object, {opts.model.model, compiled->graph.name(), opts.model.training, batch}));
      }
      Status added = builder->addBucket(bucket_seq, batch, std::move(compiled->graph),
                                        compiled->kernels->kernels);
      if (!added)
        return fail(opts.output + ": " + added.message());
    } else if (!opts.output.empty()) {
      Status s = writeFileAtomic(opts.output, graphToJson(compiled->graph).dump(1) + "\n");
      if (!s)
        return fail(s.error());
    }
  }
  if (!opts.report.empty()) {
    const nlohmann::json &report =
        seqs.size() == 1 ? reports.back() : nlohmann::json{{"buckets", reports}};
    Status s = writeFileAtomic(opts.report, report.dump(2) + "\n");
    if (!s)
      return fail(s.error());
  }
  if (builder) {
    const artifact::Artifact a = std::move(*builder).finish();
    auto key = artifact::SigningKey::loadOrCreate();
    if (!key)
      return fail(key.error());
    auto bytes = artifact::encodeArtifact(a, *key);
    if (!bytes)
      return fail(bytes.error().withContext(opts.output));
    Status s = writeFileAtomic(opts.output, *bytes);
    if (!s)
      return fail(s.error());
    size_t kernels = 0;
    for (const artifact::Bucket &b : a.buckets)
      kernels += b.kernels.size();
    std::cout << "kiln: wrote " << opts.output << ": " << a.buckets.size() << " bucket"
              << (a.buckets.size() == 1 ? "" : "s") << " (seq " << a.seqList() << "), " << kernels
              << " kernels, " << a.objects.size() << " objects, " << bytes->size()
              << " bytes, signed by key " << artifact::keyFingerprint(key->publicKey()) << "\n";
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
  cmd->add_option("--batch", opts->model.batch, "batch size")->check(PositiveInteger);
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
