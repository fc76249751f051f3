// The one path every debug command takes from a job to a run it can
// execute: the model's graph through the job's passes with its inputs bound
// (driver::prepareModelRun), then its kernels compiled. Each variant of a
// job a debug tool tries (a bisection trial, a fix of an overflow) is a
// spec resolved again and sent down the same path.
#pragma once

#include <functional>

#include "compiler/codegen/compiled_kernels.h"
#include "compiler/driver/job.h"
#include "compiler/driver/kernels.h"
#include "compiler/driver/reference_run.h"

namespace kiln::debug {

struct CompiledRun {
  driver::PreparedRun run; // the graph after the job's passes, its inputs bound
  codegen::CompiledKernels kernels;
};

// `request`'s model prepared for `job` (request.job is set to it) and its
// kernels compiled with the cache `cache` asks for. `edit`, when given,
// changes the prepared graph before its kernels are compiled (bisection's
// limit on a pass's groups).
Expected<CompiledRun> compileModelRun(driver::ReferenceRunRequest request,
                                      const driver::ResolvedJob &job,
                                      const driver::KernelSettings &cache,
                                      const std::function<Status(Graph &)> &edit = {});

// The same for a variant of a job: `spec` resolved first.
Expected<CompiledRun> compileModelRun(const driver::ReferenceRunRequest &request,
                                      const driver::JobSpec &spec,
                                      const driver::KernelSettings &cache);

} // namespace kiln::debug
