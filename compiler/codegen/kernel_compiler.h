// Compiling every kernel of a graph: partition, build each kernel's program,
// check it against the target, then compile each distinct kernel once —
// from the kernel cache when it holds the object, with LLVM otherwise — in
// parallel on the host's cores.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/cache/kernel_cache.h"
#include "compiler/codegen/kernel_builder.h"
#include "compiler/codegen/kernel_diagnostic.h"
#include "compiler/codegen/object_compiler.h"
#include "compiler/codegen/target_check.h"
#include "target/target.h"

namespace kiln::codegen {

struct KernelCompileOptions {
  ObjectOptions object;
  cache::KernelCache *cache = nullptr; // null: compile everything, keep nothing
  bool explain_misses = false;
  int threads = 0; // 0: one per core
};

struct CompiledKernel {
  KernelSpec spec;
  KernelBuild build;
  KernelTiling tiling;
  std::string key;    // cache key, hex
  std::string symbol; // the entry point in the object
  int object = -1;    // index into CompiledKernels::objects, shared by identical kernels
};

struct KernelStats {
  int64_t total = 0;      // kernels in the graph
  int64_t unique = 0;     // distinct kernels (identical layers share one)
  int64_t compiled = 0;   // compiled by LLVM in this run
  int64_t cache_hits = 0; // distinct kernels loaded from the cache
  double seconds = 0;
  nlohmann::json toJson() const;
};

struct CompiledKernels {
  std::vector<CompiledKernel> kernels; // in execution order
  std::vector<std::string> objects;    // one object per distinct kernel
  KernelStats stats;
  std::vector<std::string> miss_explanations; // with explain_misses
};

// A compile that failed on the target's constraints carries every diagnostic.
struct KernelCompileFailure {
  std::vector<KernelDiagnostic> diagnostics;
  std::string message() const; // all of them, readable
};

// The key parts every kernel of this kiln, host and LLVM shares.
cache::CacheKeyInputs baseKeyInputs(const target::Target &target, const ObjectOptions &options);

Expected<CompiledKernels> compileKernels(const Graph &graph, const target::Target &target,
                                         const KernelCompileOptions &options,
                                         KernelCompileFailure *failure = nullptr);

} // namespace kiln::codegen
