#include "debug/bisect_job.h"

#include <cmath>
#include <optional>
#include <set>
#include <tuple>

#include "compiler/codegen/kernel_compiler.h"
#include "debug/job_run.h"
#include "ir/tensor_compare.h"
#include "runtime/executor.h"

namespace kiln::debug {
namespace {

// The failure a trial reproduces: the codes of the kernels that failed.
using Signature = std::set<std::string>;

Signature signatureOf(const std::vector<codegen::KernelDiagnostic> &failures) {
  Signature s;
  for (const codegen::KernelDiagnostic &d : failures)
    s.insert(d.code);
  return s;
}

// "" when every output is finite, else "'loss' is nan" for the first that is not.
std::string firstNonFinite(const ops::TensorMap &outputs) {
  for (const auto &[name, t] : outputs) {
    if (!isFloat(t.dtype()))
      continue;
    for (int64_t i = 0; i < t.numElements(); ++i) {
      const float v = t.getFloat(i);
      if (!std::isfinite(v))
        return "'" + name + "' is " + (std::isnan(v) ? "nan" : "inf");
    }
  }
  return "";
}

// `job` with `trial`'s passes off.
Expected<driver::ResolvedJob> trialJob(const driver::JobSpec &job, const BisectTrial &trial) {
  return driver::resolveJob(job.withPassesDisabled(trial.disabled));
}

// The outputs of a trial's compiled run.
using TrialOutputs =
    std::function<Expected<ops::TensorMap>(const driver::ResolvedJob &, const BisectTrial &)>;

// --check accuracy's reference and what it is (bisectJob's comment).
Expected<std::pair<ops::TensorMap, std::string>>
accuracyReference(const driver::JobSpec &job, const std::vector<BisectCandidate> &candidates,
                  const TrialOutputs &outputsOf) {
  BisectTrial none;
  for (const BisectCandidate &c : candidates)
    none.disabled.push_back(c.name);
  KILN_ASSIGN_OR_RETURN(driver::ResolvedJob plain, trialJob(job, none));
  KILN_ASSIGN_OR_RETURN(ops::TensorMap ref, outputsOf(plain, none));
  const std::string plain_bad = firstNonFinite(ref);
  if (plain_bad.empty())
    return std::pair{std::move(ref), std::string("every switchable pass off")};
  driver::JobSpec fp32_job = job;
  fp32_job.flags.precision_mode = passes::PrecisionMode::ForceFp32;
  KILN_ASSIGN_OR_RETURN(driver::ResolvedJob fp32, trialJob(fp32_job, none));
  KILN_ASSIGN_OR_RETURN(ref, outputsOf(fp32, none));
  if (const std::string fp32_bad = firstNonFinite(ref); !fp32_bad.empty())
    return Error("debug bisect --check accuracy: no finite reference to compare with: with every "
                 "switchable pass off " +
                 plain_bad + ", and under precision_mode force_fp32 " + fp32_bad +
                 "; no pass causes this: 'kiln debug overflow' with the same model, weights, "
                 "inputs and flags names the op that overflows");
  return std::pair{std::move(ref),
                   "force_fp32 with every switchable pass off (the job's own run with them off "
                   "is not finite: " +
                       plain_bad + ")"};
}

// The graph of `model` after `trial_job`'s passes, limited as the trial says.
Expected<Graph> trialGraph(const driver::ModelRequest &model, const driver::ResolvedJob &trial_job,
                           const BisectTrial &trial) {
  KILN_ASSIGN_OR_RETURN(Graph graph, driver::buildModelGraph(model, trial_job));
  KILN_RETURN_IF_ERROR(driver::compileGraph(graph, trial_job).status());
  if (!trial.limited_pass.empty())
    KILN_RETURN_IF_ERROR(keepFirstGroups(graph, trial.limited_pass, trial.keep_groups));
  return graph;
}

} // namespace

Expected<BisectResult> bisectJob(const BisectJobRequest &request, const driver::ResolvedJob &job) {
  // Candidates: the job's enabled passes it may switch off, in run order,
  // with the groups each formed in the full job.
  Graph full("none");
  if (auto g = trialGraph(request.model, job, {}))
    full = std::move(*g);
  std::vector<BisectCandidate> candidates;
  for (const passes::Pass *p : job.registry->ordered()) {
    const passes::PassInfo &info = p->info();
    if (!info.may_disable || !job.context->decide(*p).enabled)
      continue;
    candidates.push_back(
        {info.name, info.group, static_cast<int64_t>(groupsFormedBy(full, info.name).size())});
  }

  // --check accuracy: the compiled run's outputs, against the same run with
  // every candidate off (so only passes can make a difference).
  driver::ReferenceRunRequest run_request;
  run_request.model = request.model.model;
  run_request.weights_path = request.weights;
  run_request.inputs_path = request.inputs;
  run_request.training = request.model.training;
  run_request.loss = request.model.loss;
  run_request.input_shapes = request.model.input_shapes;
  TrialOutputs outputsOf = [&](const driver::ResolvedJob &trial_job,
                               const BisectTrial &trial) -> Expected<ops::TensorMap> {
    auto limit = [&](Graph &graph) {
      return trial.limited_pass.empty()
                 ? Status::ok()
                 : keepFirstGroups(graph, trial.limited_pass, trial.keep_groups);
    };
    KILN_ASSIGN_OR_RETURN(CompiledRun run,
                          compileModelRun(run_request, trial_job, request.cache, limit));
    KILN_ASSIGN_OR_RETURN(auto executor,
                          runtime::Executor::create(run.run.graph, std::move(run.kernels)));
    KILN_ASSIGN_OR_RETURN(ops::TensorMap outputs, executor->run(run.run.inputs));
    return driver::selectRunOutputs(std::move(outputs));
  };
  std::optional<ops::TensorMap> reference;
  std::string reference_name;
  if (request.accuracy) {
    KILN_ASSIGN_OR_RETURN(auto ref, accuracyReference(job.spec, candidates, outputsOf));
    std::tie(reference, reference_name) = std::move(ref);
  }

  std::optional<Signature> baseline;
  BisectPredicate fails = [&](const BisectTrial &trial) -> Expected<bool> {
    KILN_ASSIGN_OR_RETURN(driver::ResolvedJob trial_job, trialJob(job.spec, trial));
    if (!request.accuracy) {
      KILN_ASSIGN_OR_RETURN(Graph graph, trialGraph(request.model, trial_job, trial));
      const std::vector<codegen::KernelDiagnostic> failures =
          codegen::checkKernels(graph, trial_job.target);
      if (failures.empty())
        return false;
      Signature sig = signatureOf(failures);
      if (!baseline)
        baseline = sig; // the job as given defines the failure
      for (const std::string &code : sig)
        if (baseline->count(code))
          return true;
      return false;
    }
    KILN_ASSIGN_OR_RETURN(ops::TensorMap got, outputsOf(trial_job, trial));
    for (const auto &[name, want] : *reference)
      if (!firstMismatch(got.at(name), want, request.tolerance, request.tolerance).empty())
        return true;
    return false;
  };

  KILN_ASSIGN_OR_RETURN(
      BisectResult result, bisect(candidates, fails, [&](const std::string &pass, int64_t n) {
        std::vector<std::string> names = groupsFormedBy(full, pass);
        return n >= 1 && n <= static_cast<int64_t>(names.size()) ? names[n - 1] : std::string();
      }));
  result.reference = reference_name;
  // The job's own outputs are not finite even with every pass off (the
  // reference is force_fp32's): an overflow, which no pass switch fixes.
  if (request.accuracy && result.fails_without_passes && reference_name.rfind("force_fp32", 0) == 0)
    result.next_step = "the job's own outputs are not finite: 'kiln debug overflow' with the "
                       "same model, weights, inputs and flags names the op that overflows and "
                       "verifies fixes";
  return result;
}

} // namespace kiln::debug
