// What compiling a graph's kernels gives: per kernel its spec, program,
// tiling, cache key and entry point in one of the objects, in execution
// order. The compiler (kernel_compiler.h) and an artifact's loader make it;
// the runtime (runtime/executor.h) runs it through kernels/kernel_abi.h.
// Data only: nothing here generates code.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/cache/cache_key.h"
#include "compiler/codegen/kernel_builder.h"
#include "compiler/codegen/kernel_diagnostic.h"
#include "compiler/codegen/target_check.h"
#include "ir/dtype.h"

namespace kiln::codegen {

struct CompiledKernel {
  KernelSpec spec;
  KernelBuild build;
  KernelTiling tiling;
  std::string key;    // cache key, hex
  std::string symbol; // the entry point in the object
  int object = -1;    // index into CompiledKernels::objects, shared by identical kernels
  // No object: the op's reference kernel runs on the host, as a fallback or
  // because the op is a collective (then the runtime runs it across the
  // devices of its group).
  bool host = false;
  bool collective = false;
};

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

struct CompiledKernels {
  OverflowMode overflow = OverflowMode::InfNan; // the rounding built into every kernel
  std::vector<CompiledKernel> kernels;          // in execution order
  std::vector<std::string> objects;             // one object per distinct kernel
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
