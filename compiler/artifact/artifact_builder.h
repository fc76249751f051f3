// Assembling an artifact from a compiled job: one bucket per sequence length
// (its graph, kernels in order and memory plan), the kernel objects stored
// once per key across all buckets.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "compiler/artifact/artifact.h"
#include "compiler/codegen/kernel_compiler.h"
#include "ir/graph.h"
#include "support/error.h"

namespace kiln::artifact {

// [batch, seq] of the graph's "input_ids" input, or nullopt when it has none.
std::optional<std::pair<int64_t, int64_t>> tokenShape(const Graph &graph);

// The bucket of `graph` (after the job's passes) with `kernels`, the result of
// codegen::compileKernels for it under `target` and `codegen`, encoded as an
// artifact holds it: the kernel plan, the memory plan, the objects in first
// use with their code and key parts. With `rederive`, the kernels are first
// re-derived as loading will re-derive them and their keys must agree (what
// writing an artifact checks; about 0.1 s for Qwen-14B's training step).
// Kernels that fell back are an error: an artifact holds only the kernels
// its graph re-derives.
Expected<EncodedBucket> encodeCompiledBucket(int64_t seq, int64_t batch, const Graph &graph,
                                             const codegen::CompiledKernels &kernels,
                                             const target::Target &target,
                                             const codegen::ObjectOptions &codegen,
                                             bool rederive = true);

class ArtifactBuilder {
public:
  explicit ArtifactBuilder(Manifest manifest);

  // Adds the bucket of `graph` (after the job's passes) with `kernels`, the
  // result of codegen::compileKernels for it under the manifest's target and
  // codegen options. The kernels are re-derived as loading will re-derive
  // them, and their keys must agree; a second bucket of the same seq is an error.
  Status addBucket(int64_t seq, int64_t batch, Graph graph,
                   const codegen::CompiledKernels &kernels);

  // The artifact, buckets sorted by seq.
  Artifact finish() &&;

private:
  Artifact artifact_;
  std::map<std::string, int> object_of_key_;
};

} // namespace kiln::artifact
