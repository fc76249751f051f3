#include "compiler/driver/kernels.h"

#include "compiler/cache/kernel_cache.h"

namespace kiln::driver {

Expected<JobKernels> compileJobKernels(const Graph &graph, const ResolvedJob &job,
                                       const KernelCacheSettings &cache_settings,
                                       codegen::KernelCompileFailure *failure) {
  JobKernels result;
  std::unique_ptr<cache::KernelCache> cache;
  if (cache_settings.mode != cache::CacheMode::Disable) {
    KILN_ASSIGN_OR_RETURN(result.cache_dir, cache::resolveCacheDir(cache_settings.dir));
    KILN_ASSIGN_OR_RETURN(uint64_t max_bytes, cache::maxSizeFromEnv());
    KILN_ASSIGN_OR_RETURN(
        cache, cache::KernelCache::open(result.cache_dir, cache_settings.mode, max_bytes));
  }
  codegen::KernelCompileOptions options;
  options.object.overflow = job.overflow;
  options.cache = cache.get();
  options.explain_misses = cache_settings.explain_misses;
  options.on_error = cache_settings.on_compile_error;
  KILN_ASSIGN_OR_RETURN(result.kernels,
                        codegen::compileKernels(graph, job.target, options, failure));
  if (cache)
    KILN_RETURN_IF_ERROR(cache->flushStats());
  return result;
}

} // namespace kiln::driver
