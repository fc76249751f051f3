// Buckets from compiled graphs, objects merged by key.
#include "compiler/artifact/artifact_builder.h"

#include <algorithm>
#include <filesystem>

#include "compiler/artifact/kernel_derivation.h"

namespace kiln::artifact {

std::optional<std::pair<int64_t, int64_t>> tokenShape(const Graph &graph) {
  const GraphInput *ids = graph.findInput("input_ids");
  if (!ids || graph.type(ids->value).shape.size() != 2)
    return std::nullopt;
  const Shape &shape = graph.type(ids->value).shape;
  return std::make_pair(shape[0], shape[1]);
}

ArtifactBuilder::ArtifactBuilder(Manifest manifest) { artifact_.manifest = std::move(manifest); }

Status ArtifactBuilder::addBucket(int64_t seq, int64_t batch, Graph graph,
                                  const codegen::CompiledKernels &kernels) {
  if (artifact_.findBucket(seq))
    return Error("two buckets for seq " + std::to_string(seq));
  if (!kernels.fallbacks.empty())
    return Error("seq " + std::to_string(seq) + ": " + std::to_string(kernels.fallbacks.size()) +
                 " kernel" + (kernels.fallbacks.size() == 1 ? "" : "s") + " fell back ('" +
                 kernels.fallbacks.front().why.kernel +
                 "' first): an artifact holds only the kernels its graph re-derives; make the "
                 "job fit the target, or compile without -o FILE.kiln");
  const Manifest &m = artifact_.manifest;
  KILN_ASSIGN_OR_RETURN(std::vector<DerivedKernel> derived,
                        deriveKernels(graph, m.target, m.codegen));
  if (derived.size() != kernels.kernels.size())
    return Error("seq " + std::to_string(seq) + ": the graph re-derives into " +
                 std::to_string(derived.size()) + " kernels, " +
                 std::to_string(kernels.kernels.size()) + " were compiled");

  Bucket bucket;
  bucket.seq = seq;
  bucket.batch = batch;
  std::vector<codegen::KernelSpec> specs;
  for (size_t i = 0; i < derived.size(); ++i) {
    const codegen::CompiledKernel &k = kernels.kernels[i];
    DerivedKernel &d = derived[i];
    // A disagreement here would make the artifact unloadable: refuse to write it.
    if (d.key.hex != k.key || d.spec.name != k.spec.name)
      return Error("kernel '" + k.spec.name + "' (seq " + std::to_string(seq) +
                   "): re-derived as '" + d.spec.name + "' with key " + d.key.hex.substr(0, 16) +
                   "..., compiled under " + k.key.substr(0, 16) +
                   "...; the artifact could not be loaded");
    auto [it, fresh] = object_of_key_.emplace(k.key, static_cast<int>(artifact_.objects.size()));
    if (fresh)
      artifact_.objects.push_back(
          {k.key, k.symbol, k.spec.kind, d.key.parts, kernels.objects[k.object]});
    PlannedKernel p;
    p.name = k.spec.name;
    p.kind = k.spec.kind;
    p.formed_by = k.spec.formed_by;
    p.grouped = k.spec.grouped;
    p.key = k.key;
    p.symbol = k.symbol;
    p.object = it->second;
    for (ValueId v : k.spec.inputs)
      p.inputs.push_back(graph.valueName(v));
    for (ValueId v : k.spec.outputs)
      p.outputs.push_back(graph.valueName(v));
    bucket.kernels.push_back(std::move(p));
    specs.push_back(std::move(d.spec));
  }
  // The file name only: the artifact says where a definition came from,
  // not where it lay on the machine that compiled it.
  for (frontend::CustomOpSource file : frontend::customOpSourcesFor(graph)) {
    file.path = std::filesystem::path(file.path).filename().string();
    if (std::find(artifact_.custom_ops.begin(), artifact_.custom_ops.end(), file) ==
        artifact_.custom_ops.end())
      artifact_.custom_ops.push_back(std::move(file));
  }
  bucket.memory = planMemory(graph, specs);
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
