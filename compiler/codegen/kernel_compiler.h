// Compiling every kernel of a graph: partition, build each kernel's program,
// check it against the target, then compile each distinct kernel once —
// from the kernel cache when it holds the object, with LLVM otherwise — in
// parallel on the host's cores.
#pragma once

#include <string>
#include <vector>

#include "compiler/cache/kernel_cache.h"
#include "compiler/codegen/compiled_kernels.h"
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
