// Re-deriving a compiled graph's kernels with this kiln: the partition, each
// kernel's program and tiling, and its cache key with the key's parts. Cheap
// (no LLVM): writing an artifact records the keys, loading one recomputes
// them to prove the stored objects are what this kiln would compile.
#pragma once

#include <vector>

#include "compiler/cache/cache_key.h"
#include "compiler/codegen/kernel_builder.h"
#include "compiler/codegen/object_compiler.h"
#include "compiler/codegen/target_check.h"
#include "ir/graph.h"
#include "support/error.h"
#include "target/target.h"

namespace kiln::artifact {

struct DerivedKernel {
  codegen::KernelSpec spec;
  codegen::KernelBuild build;
  codegen::KernelTiling tiling;
  cache::CacheKey key;
};

// The kernels of `graph` in execution order, keyed as codegen::compileKernels
// keys them for `target` and `options` on this host. A kernel that no longer
// lowers or fits the target is an error naming it.
Expected<std::vector<DerivedKernel>> deriveKernels(const Graph &graph, const target::Target &target,
                                                   const codegen::ObjectOptions &options);

} // namespace kiln::artifact
