#include "debug/compare_job.h"

#include "debug/job_run.h"

namespace kiln::debug {

double compareTolerance(DType dtype) {
  return dtype == DType::F32 ? 1e-4 : dtype == DType::F16 ? 1e-2 : 5e-2;
}

Expected<driver::ResolvedJob> unfusedJob(const driver::ResolvedJob &job) {
  std::vector<std::string> off;
  for (const passes::Pass *p : job.registry->ordered()) {
    const passes::PassInfo &info = p->info();
    if ((info.group == passes::PassGroup::GraphFusion ||
         info.group == passes::PassGroup::UBFusion) &&
        info.may_disable)
      off.push_back(info.name);
  }
  return driver::resolveJob(job.spec.withPassesDisabled(off));
}

Expected<CompareReport> compareJob(const CompareJobRequest &request,
                                   const driver::ResolvedJob &job) {
  const double tolerance = request.tolerance >= 0 ? request.tolerance : compareTolerance(job.dtype);
  Expected<ValueTrace> got = Error("not run"), want = Error("not run");
  driver::PreparedRun run;
  if (request.against == "reference") {
    KILN_ASSIGN_OR_RETURN(CompiledRun compiled, compileModelRun(request.run, job, request.cache));
    run = std::move(compiled.run);
    got = traceCompiled(run.graph, std::move(compiled.kernels), run.inputs);
    want = traceReference(run.graph, run.inputs, run.overflow);
  } else {
    driver::ReferenceRunRequest fused = request.run;
    fused.job = &job;
    KILN_ASSIGN_OR_RETURN(run, driver::prepareModelRun(fused));
    KILN_ASSIGN_OR_RETURN(driver::ResolvedJob plain, unfusedJob(job));
    driver::ReferenceRunRequest plain_request = request.run;
    plain_request.job = &plain;
    KILN_ASSIGN_OR_RETURN(driver::PreparedRun plain_run, driver::prepareModelRun(plain_request));
    got = traceReference(run.graph, run.inputs, run.overflow);
    want = traceReference(plain_run.graph, plain_run.inputs, plain_run.overflow);
  }
  KILN_RETURN_IF_ERROR(got.status());
  KILN_RETURN_IF_ERROR(want.status());
  CompareReport report = compareTraces(run.graph, *got, *want, tolerance);
  report.against = request.against;
  return report;
}

} // namespace kiln::debug
