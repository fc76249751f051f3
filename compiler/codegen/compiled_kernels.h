// What compiling a graph's kernels gives: what the runtime runs
// (executable/executable.h: per kernel its spec, GEMM, launch, tiling, cache
// key and entry point in one of the objects, in execution order) and the
// compile's own record: its statistics, each object's key with its parts,
// the misses explained and the kernels that fell back. The compiler
// (kernel_compiler.h) and an artifact's loader make it. Data only: nothing
// here generates code.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/cache/cache_key.h"
#include "compiler/codegen/kernel_builder.h"
#include "compiler/codegen/kernel_diagnostic.h"
#include "executable/executable.h"

namespace kiln::codegen {

using executable::CompiledKernel;

// What the runtime reads of a built kernel's program: how a launch walks its rows.
executable::KernelLaunch launchOf(const KernelProgram &program);

// A kernel that could not be built as planned, and what ran instead.
struct KernelFallback {
  KernelDiagnostic why;
  std::string action; // "split into 3 single-op kernels", "runs its reference kernel on the host"
  nlohmann::json toJson() const;
};

struct KernelStats {
  int64_t total = 0;      // kernels in the graph
  int64_t unique = 0;     // distinct kernels (identical layers share one)
  int64_t compiled = 0;   // compiled by LLVM in this run
  int64_t cache_hits = 0; // distinct kernels loaded from the cache
  double seconds = 0;
  nlohmann::json toJson() const;
};

// The runtime takes the executable part (Executor::create, Profiler::addProgram).
struct CompiledKernels : executable::Executable {
  // The cache key each object was compiled under, with its parts (empty for
  // kernels loaded from an artifact).
  std::vector<cache::CacheKey> object_keys;
  KernelStats stats;
  std::vector<std::string> miss_explanations; // with explain_misses
  std::vector<KernelFallback> fallbacks;      // with OnCompileError::Fallback
};

// A compile that failed on the target's constraints carries every diagnostic.
struct KernelCompileFailure {
  std::vector<KernelDiagnostic> diagnostics;
  std::string message() const; // all of them, readable
};

// The fallbacks, readable: each distinct one in full, then the kernels like it.
std::string fallbackSummary(const std::vector<KernelFallback> &fallbacks);

} // namespace kiln::codegen
