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

// What a kernel the target cannot hold does to the compile.
enum class OnCompileError {
  Fail,     // the compile fails with every diagnostic
  Fallback, // a failing group splits into single-op kernels; a failing op runs
            // its reference kernel on the host; every fallback is reported
};

struct KernelCompileOptions {
  ObjectOptions object;
  OnCompileError on_error = OnCompileError::Fail;
  cache::KernelCache *cache = nullptr; // null: compile everything, keep nothing
  bool explain_misses = false;
  int threads = 0; // 0: one per core
  // False: every kernel is partitioned, built and checked as for a compile,
  // but no object is made (CompiledKernels::objects stays empty): a plan of
  // the program's kernels and memory that cannot run.
  bool compile_objects = true;
  // Where the IR of a kernel that cannot be built is written
  // (KernelDiagnostic::ir_dump); empty: nowhere.
  std::string dump_dir;
};

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

// The key parts every kernel of this kiln, host and LLVM shares.
cache::CacheKeyInputs baseKeyInputs(const target::Target &target, const ObjectOptions &options);

// What compiling `graph` would fail with, found without compiling anything:
// every kernel is partitioned, built and checked against the target, and
// LLVM never runs. Cheap enough to run per trial of a bisection or reduction.
std::vector<KernelDiagnostic> checkKernels(const Graph &graph, const target::Target &target);

Expected<CompiledKernels> compileKernels(const Graph &graph, const target::Target &target,
                                         const KernelCompileOptions &options,
                                         KernelCompileFailure *failure = nullptr);

} // namespace kiln::codegen
