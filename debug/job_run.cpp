#include "debug/job_run.h"

namespace kiln::debug {

Expected<CompiledRun> compileModelRun(driver::ReferenceRunRequest request,
                                      const driver::ResolvedJob &job,
                                      const driver::KernelSettings &cache,
                                      const std::function<Status(Graph &)> &edit) {
  request.job = &job;
  KILN_ASSIGN_OR_RETURN(driver::PreparedRun run, driver::prepareModelRun(request));
  if (edit)
    KILN_RETURN_IF_ERROR(edit(run.graph));
  KILN_ASSIGN_OR_RETURN(driver::JobKernels kernels,
                        driver::compileJobKernels(run.graph, job, cache));
  return CompiledRun{std::move(run), std::move(kernels.kernels)};
}

Expected<CompiledRun> compileModelRun(const driver::ReferenceRunRequest &request,
                                      const driver::JobSpec &spec,
                                      const driver::KernelSettings &cache) {
  KILN_ASSIGN_OR_RETURN(driver::ResolvedJob job, driver::resolveJob(spec));
  return compileModelRun(request, job, cache);
}

} // namespace kiln::debug
