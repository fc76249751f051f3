// Buckets from compiled graphs, objects merged by key.
#include "compiler/artifact/artifact_builder.h"

#include <algorithm>
#include <filesystem>

#include "compiler/artifact/kernel_derivation.h"
#include "compiler/frontend/custom_ops.h"

namespace kiln::artifact {

std::optional<std::pair<int64_t, int64_t>> tokenShape(const Graph &graph) {
  const GraphInput *ids = graph.findInput("input_ids");
  if (!ids || graph.type(ids->value).shape.size() != 2)
    return std::nullopt;
  const Shape &shape = graph.type(ids->value).shape;
  return std::make_pair(shape[0], shape[1]);
}

namespace {

// A bucket's kernel plan, memory plan and the custom op files its graph uses;
// `object_of` numbers each kernel's object.
struct PlannedBucket {
  std::vector<PlannedKernel> kernels;
  executable::MemoryPlan memory;
  std::vector<ops::OpSourceFile> custom_ops;
};

// `object_of(kernel, key parts)` numbers each kernel's object. With
// `rederive`, the parts are those the re-derivation computed; without, the
// compile's own.
template <typename ObjectOf>
Expected<PlannedBucket>
planBucket(int64_t seq, const Graph &graph, const codegen::CompiledKernels &kernels,
           const target::Target &target, const codegen::ObjectOptions &codegen, bool rederive,
           ObjectOf object_of) {
  if (!kernels.fallbacks.empty())
    return Error("seq " + std::to_string(seq) + ": " + std::to_string(kernels.fallbacks.size()) +
                 " kernel" + (kernels.fallbacks.size() == 1 ? "" : "s") + " fell back ('" +
                 kernels.fallbacks.front().why.kernel +
                 "' first): an artifact holds only the kernels its graph re-derives; make the "
                 "job fit the target, or compile without -o FILE.kiln");
  std::vector<DerivedKernel> derived;
  if (rederive) {
    KILN_ASSIGN_OR_RETURN(derived, deriveKernels(graph, target, codegen));
    if (derived.size() != kernels.kernels.size())
      return Error("seq " + std::to_string(seq) + ": the graph re-derives into " +
                   std::to_string(derived.size()) + " kernels, " +
                   std::to_string(kernels.kernels.size()) + " were compiled");
  } else if (kernels.object_keys.size() != kernels.objects.size()) {
    return Error("seq " + std::to_string(seq) + ": the compiled kernels carry no keys");
  }

  PlannedBucket out;
  std::vector<codegen::KernelSpec> specs;
  for (size_t i = 0; i < kernels.kernels.size(); ++i) {
    const codegen::CompiledKernel &k = kernels.kernels[i];
    const std::vector<std::pair<std::string, std::string>> *parts = nullptr;
    if (!rederive) {
      if (k.object < 0 || static_cast<size_t>(k.object) >= kernels.object_keys.size())
        return Error("kernel '" + k.spec.name + "' (seq " + std::to_string(seq) +
                     ") has no object: an artifact holds only compiled kernels");
      parts = &kernels.object_keys[static_cast<size_t>(k.object)].parts;
    } else {
      DerivedKernel &d = derived[i];
      // A disagreement here would make the artifact unloadable: refuse to write it.
      if (d.key.hex != k.key || d.spec.name != k.spec.name)
        return Error("kernel '" + k.spec.name + "' (seq " + std::to_string(seq) +
                     "): re-derived as '" + d.spec.name + "' with key " + d.key.hex.substr(0, 16) +
                     "..., compiled under " + k.key.substr(0, 16) +
                     "...; the artifact could not be loaded");
      parts = &d.key.parts;
    }
    PlannedKernel p;
    p.name = k.spec.name;
    p.kind = k.spec.kind;
    p.formed_by = k.spec.formed_by;
    p.grouped = k.spec.grouped;
    p.key = k.key;
    p.symbol = k.symbol;
    p.object = object_of(k, *parts);
    for (ValueId v : k.spec.inputs)
      p.inputs.push_back(graph.valueName(v));
    for (ValueId v : k.spec.outputs)
      p.outputs.push_back(graph.valueName(v));
    out.kernels.push_back(std::move(p));
    specs.push_back(rederive ? std::move(derived[i].spec) : k.spec);
  }
  // The file name only: the artifact says where a definition came from,
  // not where it lay on the machine that compiled it.
  for (ops::OpSourceFile file : frontend::customOpSourcesFor(graph)) {
    file.path = std::filesystem::path(file.path).filename().string();
    if (std::find(out.custom_ops.begin(), out.custom_ops.end(), file) == out.custom_ops.end())
      out.custom_ops.push_back(std::move(file));
  }
  out.memory = executable::planMemory(graph, specs);
  return out;
}

} // namespace

Expected<EncodedBucket> encodeCompiledBucket(int64_t seq, int64_t batch, const Graph &graph,
                                             const codegen::CompiledKernels &kernels,
                                             const target::Target &target,
                                             const codegen::ObjectOptions &codegen, bool rederive) {
  EncodedBucket out;
  out.seq = seq;
  out.batch = batch;
  std::map<std::string, int> object_of_key;
  auto object_of = [&](const codegen::CompiledKernel &k, const auto &parts) {
    auto [it, fresh] = object_of_key.emplace(k.key, static_cast<int>(out.objects.size()));
    if (fresh)
      out.objects.push_back({k.key, k.symbol, k.spec.kind, parts, kernels.objects[k.object]});
    return it->second;
  };
  KILN_ASSIGN_OR_RETURN(PlannedBucket planned,
                        planBucket(seq, graph, kernels, target, codegen, rederive, object_of));
  out.kernels = static_cast<int64_t>(planned.kernels.size());
  KILN_ASSIGN_OR_RETURN(out.text,
                        encodeBucketText(seq, batch, graph, planned.kernels, planned.memory));
  out.custom_ops = std::move(planned.custom_ops);
  return out;
}

ArtifactBuilder::ArtifactBuilder(Manifest manifest) { artifact_.manifest = std::move(manifest); }

Status ArtifactBuilder::addBucket(int64_t seq, int64_t batch, Graph graph,
                                  const codegen::CompiledKernels &kernels) {
  if (artifact_.findBucket(seq))
    return Error("two buckets for seq " + std::to_string(seq));
  const Manifest &m = artifact_.manifest;
  auto object_of = [&](const codegen::CompiledKernel &k, const auto &parts) {
    auto [it, fresh] = object_of_key_.emplace(k.key, static_cast<int>(artifact_.objects.size()));
    if (fresh)
      artifact_.objects.push_back({k.key, k.symbol, k.spec.kind, parts, kernels.objects[k.object]});
    return it->second;
  };
  KILN_ASSIGN_OR_RETURN(PlannedBucket planned, planBucket(seq, graph, kernels, m.target, m.codegen,
                                                          /*rederive=*/true, object_of));
  for (ops::OpSourceFile &file : planned.custom_ops)
    if (std::find(artifact_.custom_ops.begin(), artifact_.custom_ops.end(), file) ==
        artifact_.custom_ops.end())
      artifact_.custom_ops.push_back(std::move(file));
  Bucket bucket;
  bucket.seq = seq;
  bucket.batch = batch;
  bucket.kernels = std::move(planned.kernels);
  bucket.memory = std::move(planned.memory);
  bucket.graph = std::move(graph);
  artifact_.buckets.push_back(std::move(bucket));
  return Status::ok();
}

Artifact ArtifactBuilder::finish() && {
  std::sort(artifact_.buckets.begin(), artifact_.buckets.end(),
            [](const Bucket &a, const Bucket &b) { return a.seq < b.seq; });
  return std::move(artifact_);
}

} // namespace kiln::artifact
