#include "compiler/driver/kernels.h"

#include "compiler/cache/kernel_cache.h"
#include "compiler/driver/compile.h"

#include <spdlog/spdlog.h>

namespace kiln::driver {

std::unique_ptr<cache::KernelCache> openKernelCache(const KernelSettings &settings,
                                                    std::string &dir) {
  dir.clear();
  if (settings.mode == cache::CacheMode::Disable)
    return nullptr;
  auto opened = [&]() -> Expected<std::unique_ptr<cache::KernelCache>> {
    KILN_ASSIGN_OR_RETURN(dir, cache::resolveCacheDir(settings.dir));
    return cache::KernelCache::openConfigured(dir, settings.mode);
  }();
  if (opened)
    return std::move(*opened);
  spdlog::warn("kernel cache: {}; compiling without it", opened.message());
  return nullptr;
}

Expected<JobKernels> compileJobKernels(const Graph &graph, const ResolvedJob &job,
                                       const KernelSettings &settings,
                                       codegen::KernelCompileFailure *failure,
                                       cache::KernelCache *cache) {
  JobKernels result;
  std::unique_ptr<cache::KernelCache> own;
  if (cache)
    result.cache_dir = cache->dir();
  else
    cache = (own = openKernelCache(settings, result.cache_dir)).get();
  codegen::KernelCompileOptions options;
  options.object.overflow = job.overflow;
  options.cache = cache;
  options.explain_misses = settings.explain_misses;
  options.on_error = settings.on_compile_error;
  options.dump_dir = settings.dump_dir;
  options.compile_objects = settings.compile_objects;
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
