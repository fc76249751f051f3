#include "debug/reduce_job.h"

#include "compiler/driver/kernels.h"
#include "debug/repro.h"

namespace kiln::debug {

bool FailureSignature::matches(const std::vector<codegen::KernelDiagnostic> &failures) const {
  for (const codegen::KernelDiagnostic &d : failures)
    if (d.code == code && d.kind == kind && d.formed_by == formed_by)
      return true;
  return false;
}

std::string FailureSignature::toString() const {
  return code + " in a " + kind + " kernel" + (formed_by.empty() ? "" : " formed by " + formed_by);
}

namespace {

// Reads the written folder back as a user would and checks it fails the same
// way: a repro that does not reproduce is worse than none.
Status checkRepro(const std::string &dir, const FailureSignature &signature) {
  KILN_ASSIGN_OR_RETURN(driver::JobSettings settings, driver::readJobFile(dir + "/job.json"));
  KILN_ASSIGN_OR_RETURN(driver::ResolvedJob job, driver::resolveJob(settings, driver::JobSettings{},
                                                                    driver::kDefaultModelDType));
  driver::ModelRequest model;
  model.model = dir + "/graph.json";
  KILN_ASSIGN_OR_RETURN(Graph graph, driver::buildModelGraph(model, job));
  KILN_ASSIGN_OR_RETURN(auto failures, driver::kernelFailures(std::move(graph), job));
  if (!signature.matches(failures))
    return Error(dir + ": the written repro does not fail with " + signature.toString() +
                 "; this is a bug in kiln debug reduce");
  return Status::ok();
}

} // namespace

Expected<ReduceJobResult> reduceJob(const driver::ModelRequest &model,
                                    const driver::ResolvedJob &job, const std::string &output,
                                    int max_trials) {
  KILN_ASSIGN_OR_RETURN(Graph graph, driver::buildModelGraph(model, job));
  KILN_ASSIGN_OR_RETURN(auto failures, driver::kernelFailures(graph, job));
  if (failures.empty())
    return Error(model.model + ": every kernel of the job fits the target; kiln debug "
                               "reduce needs a compile that fails");
  const codegen::KernelDiagnostic &first = failures.front();
  ReduceJobResult result;
  result.signature = {first.code, first.kind, first.formed_by};
  const FailureSignature &signature = result.signature;

  ReduceOptions options;
  options.max_trials = max_trials;
  for (const codegen::KernelMember &m : first.members)
    options.focus.push_back(m.name);
  KILN_ASSIGN_OR_RETURN(
      ReduceResult reduced,
      reduceGraph(
          graph,
          [&](const Graph &candidate) -> Expected<bool> {
            // A cut-out graph lacks most nodes a keep_dtype file or layer list names.
            auto found = driver::kernelFailures(candidate, job, /*check_settings=*/false);
            return found && signature.matches(*found); // a pass error is another failure
          },
          options));

  KILN_ASSIGN_OR_RETURN(auto now_failing,
                        driver::kernelFailures(reduced.graph, job, /*check_settings=*/false));
  ReproNotes notes;
  for (const codegen::KernelDiagnostic &d : now_failing)
    if (signature.matches({d})) {
      codegen::KernelDiagnostic shown = d;
      shown.ir_dump.clear();
      notes.failure = shown.toString();
      break;
    }
  notes.origin = model.model + (model.training ? " --training" : "") +
                 (model.seq > 0 ? " --seq " + std::to_string(model.seq) : "") +
                 (model.batch != 1 ? " --batch " + std::to_string(model.batch) : "");
  notes.reduction = std::to_string(reduced.nodes_before) + " nodes to " +
                    std::to_string(reduced.graph.numNodes()) + " in " +
                    std::to_string(reduced.trials) + " trials";
  KILN_RETURN_IF_ERROR(writeRepro(output, reduced.graph, job, notes));
  KILN_RETURN_IF_ERROR(checkRepro(output, signature));
  result.reduction = notes.reduction;
  result.log = std::move(reduced.log);
  return result;
}

} // namespace kiln::debug
