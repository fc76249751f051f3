// The kernel half of a compile job: open the kernel cache the job asks for
// and compile every kernel of the passes' result through it.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "compiler/cache/cache_config.h"
#include "compiler/cache/kernel_cache.h"
#include "compiler/codegen/kernel_compiler.h"
#include "compiler/driver/job.h"

namespace kiln::driver {

struct KernelSettings {
  std::optional<std::string> dir; // --cache-dir; else KILN_CACHE_DIR, XDG, ~/.cache/kiln
  cache::CacheMode mode = cache::CacheMode::Enable;
  bool explain_misses = false;
  codegen::OnCompileError on_compile_error = codegen::OnCompileError::Fail;
  // --kernel-dump-dir: the IR of every kernel that cannot be built goes here
  // (relative to the working directory, as CANN's kernel_meta); empty: none.
  std::string dump_dir = "kiln_dump";
  // False: plan the kernels without compiling them (codegen's
  // compile_objects); the program is a plan and cannot run.
  bool compile_objects = true;
};

struct JobKernels {
  codegen::CompiledKernels kernels;
  std::string cache_dir; // empty when the cache is disabled
};

// The cache `settings` ask for, opened; null when it is disabled, and when it
// cannot be opened (a read-only mount, a full disk, no key folder, a bad
// size setting), which is a warning: the cache only saves time. `dir`
// receives its folder (empty when disabled or unresolvable).
std::unique_ptr<cache::KernelCache> openKernelCache(const KernelSettings &settings,
                                                    std::string &dir);

// Compiles `graph`'s kernels for the job's target and overflow mode, through
// `cache` when given (the caller's, opened by openKernelCache), else through
// the cache `settings` ask for. A kernel the target cannot hold fails the
// compile; `failure` then has every diagnostic.
Expected<JobKernels> compileJobKernels(const Graph &graph, const ResolvedJob &job,
                                       const KernelSettings &settings,
                                       codegen::KernelCompileFailure *failure = nullptr,
                                       cache::KernelCache *cache = nullptr);

// The kernels the target cannot hold once the job's passes have run over
// `graph`, found without compiling any (codegen::checkKernels): what debug
// bisect and reduce test per trial. An error is a pass's (or, when
// `check_settings`, a precision setting naming what `graph` lacks).
Expected<std::vector<codegen::KernelDiagnostic>> kernelFailures(Graph graph, const ResolvedJob &job,
                                                                bool check_settings = true);

} // namespace kiln::driver
