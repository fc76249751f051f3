// One model request compiled, or read back from the program cache.
#include "compiler/driver/program_compile.h"

#include <chrono>

#include <spdlog/spdlog.h>

#include "compiler/artifact/artifact_builder.h"
#include "compiler/driver/program_cache.h"
#include "formats/graph_json.h"
#include "support/file_io.h"

namespace kiln::driver {
namespace {

bool watchesPasses(const passes::Instrumentation &inst) {
  return !inst.print_before.empty() || !inst.print_after.empty() || inst.timing || inst.statistics;
}

ProgramSummary summarize(const Graph &graph, int64_t nodes_before,
                         const passes::PipelineReport &report) {
  ProgramSummary s;
  s.graph = graph.name();
  s.nodes_before = nodes_before;
  s.nodes = static_cast<int64_t>(graph.numNodes());
  s.groups = static_cast<int64_t>(graph.groups().size());
  for (const passes::PassRecord &r : report.passes)
    if (r.enabled && r.not_applicable.empty() && r.result.effect_times != 0)
      s.passes.push_back({r.name, r.result.match_times, r.result.effect_times});
  s.settings = report.settings;
  return s;
}

} // namespace

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
    if (k.gemm) {
      entry["cube_out_tile"] = k.tiling.cube_out_tile;
      entry["l0c_bytes"] = k.tiling.l0c_bytes;
    }
    list.push_back(std::move(entry));
  }
  nlohmann::json j = compiled.stats.toJson();
  j["list"] = std::move(list);
  return j;
}

Expected<nlohmann::json> ProgramCompile::report() const {
  nlohmann::json j;
  if (!fresh_report.is_null()) {
    j = fresh_report;
  } else {
    KILN_ASSIGN_OR_RETURN(j, parseJson(program.report, "the cached pass report"));
  }
  if (has_kernels) {
    nlohmann::json list = j["kernels"].value("list", nlohmann::json::array());
    j["kernels"] = kernel_stats.toJson();
    j["kernels"]["list"] = std::move(list);
  }
  if (!program_key.empty())
    j["program_cache"] = {{"key", program_key}, {"hit", from_cache}};
  return j;
}

Expected<std::string> ProgramCompile::graphJson() const {
  if (graph)
    return graphToJson(*graph).dump(1);
  // Read back: the graph is the bucket's, as the artifact holds it.
  KILN_ASSIGN_OR_RETURN(nlohmann::json bucket, parseJson(program.bucket.text, "the cached bucket"));
  if (!bucket.is_object() || !bucket.contains("graph"))
    return Error("the cached bucket has no graph");
  return jsonText(bucket["graph"], "the cached graph", 1);
}

namespace {

// The whole program from the cache under `key`, into `out`; false on a miss,
// whose explanation `out` keeps when the settings ask for it.
bool loadCachedProgram(cache::KernelCache &cache, const cache::CacheKey &key,
                       const KernelSettings &settings, ProgramCompile &out) {
  const auto start = std::chrono::steady_clock::now();
  std::string why;
  std::optional<CompiledProgram> hit =
      lookupProgram(cache, key, settings.explain_misses ? &why : nullptr);
  if (!hit) {
    if (!why.empty())
      out.miss_explanations.push_back(why);
    return false;
  }
  out.program = std::move(*hit);
  out.from_cache = true;
  out.has_kernels = true;
  codegen::KernelStats &st = out.kernel_stats;
  st.total = out.program.summary.kernels;
  st.unique = out.program.summary.unique_kernels;
  st.cache_hits = static_cast<int64_t>(out.program.bucket.objects.size());
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return true;
}

} // namespace

Expected<ProgramCompile> compileProgram(const ProgramRequest &request, const ResolvedJob &job,
                                        nlohmann::json *failure_report) {
  const KernelSettings &settings = request.kernels;
  ProgramCompile out;
  std::unique_ptr<cache::KernelCache> cache;
  if (!request.passes_only)
    cache = openKernelCache(settings, out.cache_dir);

  std::optional<cache::CacheKey> key;
  if (cache && !watchesPasses(request.instrumentation)) {
    auto made = programKey(request.model, job, settings);
    if (made)
      key = std::move(*made);
    else // the compile below says what is wrong with the model or the job's files
      spdlog::debug("program cache: no key: {}", made.message());
  }
  if (key) {
    out.program_key = key->hex;
    if (loadCachedProgram(*cache, *key, settings, out))
      return out;
  }

  KILN_ASSIGN_OR_RETURN(Graph graph, buildModelGraph(request.model, job));
  const int64_t nodes_before = static_cast<int64_t>(graph.numNodes());
  KILN_ASSIGN_OR_RETURN(passes::PipelineReport passes,
                        compileGraph(graph, job, request.instrumentation));
  nlohmann::json report = passes::reportToJson(passes, graph);
  out.program.summary = summarize(graph, nodes_before, passes);
  if (request.passes_only) {
    out.fresh_report = std::move(report);
    out.graph = std::move(graph);
    return out;
  }

  codegen::KernelCompileFailure failure;
  auto compiled = compileJobKernels(graph, job, settings, &failure, cache.get());
  if (!compiled) {
    if (failure_report && !failure.diagnostics.empty()) {
      nlohmann::json errors = nlohmann::json::array();
      for (const codegen::KernelDiagnostic &d : failure.diagnostics)
        errors.push_back(d.toJson());
      report["errors"] = std::move(errors);
      *failure_report = std::move(report);
    }
    return compiled.error();
  }
  const codegen::CompiledKernels &kernels = compiled->kernels;
  if (!cache)
    out.cache_dir = compiled->cache_dir;
  out.has_kernels = true;
  out.kernel_stats = kernels.stats;
  out.program.summary.kernels = kernels.stats.total;
  out.program.summary.unique_kernels = kernels.stats.unique;
  report["kernels"] = kernelsToJson(kernels);
  for (const std::string &line : kernels.miss_explanations)
    out.miss_explanations.push_back(line);
  out.fallbacks = kernels.fallbacks;
  if (!kernels.fallbacks.empty()) {
    nlohmann::json fallbacks = nlohmann::json::array();
    for (const codegen::KernelFallback &f : kernels.fallbacks)
      fallbacks.push_back(f.toJson());
    report["fallbacks"] = std::move(fallbacks);
  }

  // The program as an artifact bucket: [batch, seq] from its token input.
  const auto shape = artifact::tokenShape(graph);
  codegen::ObjectOptions object; // as compileJobKernels compiles
  object.overflow = job.overflow;
  auto bucket = artifact::encodeCompiledBucket(shape ? shape->second : request.model.seq,
                                               shape ? shape->first : request.model.batch, graph,
                                               kernels, job.target, object,
                                               /*rederive=*/request.for_artifact);
  if (bucket)
    out.program.bucket = std::move(*bucket);
  else
    out.bucket_error = bucket.message();

  if (key && bucket) {
    // A name that is not UTF-8 makes no JSON: such a program is not kept.
    auto text = jsonText(report, "the pass report");
    if (text) {
      out.program.report = std::move(*text);
      if (Status stored = storeProgram(*cache, *key, out.program); !stored)
        spdlog::warn("program cache: not stored: {}", stored.message());
    } else {
      spdlog::debug("program cache: not stored: {}", text.message());
    }
  }
  out.fresh_report = std::move(report);
  out.graph = std::move(graph);
  return out;
}

} // namespace kiln::driver
