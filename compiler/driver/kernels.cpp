#include "compiler/driver/kernels.h"

#include "compiler/cache/kernel_cache.h"
#include "compiler/driver/compile.h"

#include <spdlog/spdlog.h>

namespace kiln::driver {

Expected<JobKernels> compileJobKernels(const Graph &graph, const ResolvedJob &job,
                                       const KernelSettings &settings,
                                       codegen::KernelCompileFailure *failure) {
  JobKernels result;
  std::unique_ptr<cache::KernelCache> cache;
  // The cache only saves time: a cache that cannot be opened, read or written
  // (a read-only mount, a full disk, no key folder, a bad size setting) is a
  // warning, and the kernels are compiled without it.
  if (settings.mode != cache::CacheMode::Disable) {
    auto opened = [&]() -> Expected<std::unique_ptr<cache::KernelCache>> {
      KILN_ASSIGN_OR_RETURN(result.cache_dir, cache::resolveCacheDir(settings.dir));
      KILN_ASSIGN_OR_RETURN(uint64_t max_bytes, cache::maxSizeFromEnv());
      return cache::KernelCache::open(result.cache_dir, settings.mode, max_bytes);
    }();
    if (opened)
      cache = std::move(*opened);
    else
      spdlog::warn("kernel cache: {}; compiling without it", opened.message());
  }
  codegen::KernelCompileOptions options;
  options.object.overflow = job.overflow;
  options.cache = cache.get();
  options.explain_misses = settings.explain_misses;
  options.on_error = settings.on_compile_error;
  options.dump_dir = settings.dump_dir;
  KILN_ASSIGN_OR_RETURN(result.kernels,
                        codegen::compileKernels(graph, job.target, options, failure));
  return result; // the cache's destructor adds its counters, warning if it cannot
}

Expected<std::vector<codegen::KernelDiagnostic>> kernelFailures(Graph graph, const ResolvedJob &job,
                                                                bool check_settings) {
  KILN_RETURN_IF_ERROR(compileGraph(graph, job, {}, check_settings).status());
  return codegen::checkKernels(graph, job.target);
}

} // namespace kiln::driver
