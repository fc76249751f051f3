// `kiln debug`: tools for the failures that cost days to guess at —
// `compare` finds the first value where two runs part ways, `bisect` the
// pass responsible; `overflow` and `reduce` have files of their own.
#include <cmath>
#include <functional>
#include <iostream>
#include <set>
#include <tuple>

#include "compiler/driver/compile.h"
#include "compiler/driver/kernels.h"
#include "compiler/driver/reference_run.h"
#include "debug/bisect.h"
#include "debug/value_compare.h"
#include "ir/tensor_compare.h"
#include "runtime/executor.h"
#include "tools/kiln/cli_common.h"
#include "tools/kiln/job_flags.h"

namespace kiln::cli {
namespace {

// Prints a debug report as text or as JSON.
template <typename Report> int print(const std::string &format, const Report &report) {
  if (format == "json")
    std::cout << report.toJson().dump(2) << "\n";
  else
    printText(report.toText());
  return 0;
}

struct CompareOptions {
  driver::ReferenceRunRequest request;
  JobFlags job;
  driver::KernelSettings cache;
  std::string against = "reference";
  double tolerance = -1;
  size_t top = 10;
  std::string format = "text";
};

// The job with every fusion pass and rule it may switch off switched off.
Expected<driver::ResolvedJob> unfusedJob(const driver::ResolvedJob &fused) {
  std::vector<std::string> off;
  for (const passes::Pass *p : fused.registry->ordered()) {
    const passes::PassInfo &info = p->info();
    if ((info.group == passes::PassGroup::GraphFusion ||
         info.group == passes::PassGroup::UBFusion) &&
        info.may_disable)
      off.push_back(info.name);
  }
  return driver::resolveJob(fused.spec.withPassesDisabled(off));
}

int runCompare(const CompareOptions &opts) {
  auto job = resolveJobFlags(opts.job, driver::kDefaultModelDType);
  if (!job)
    return fail(job.error());
  driver::ReferenceRunRequest request = opts.request;
  request.job = &*job;
  auto run = driver::prepareModelRun(request);
  if (!run)
    return fail(run.error());
  const double tolerance = opts.tolerance >= 0        ? opts.tolerance
                           : job->dtype == DType::F32 ? 1e-4
                           : job->dtype == DType::F16 ? 1e-2
                                                      : 5e-2;
  Expected<debug::ValueTrace> got = Error("not run"), want = Error("not run");
  if (opts.against == "reference") {
    auto kernels = driver::compileJobKernels(run->graph, *job, opts.cache);
    if (!kernels)
      return fail(kernels.error());
    got = debug::traceCompiled(run->graph, std::move(kernels->kernels), run->inputs);
    want = debug::traceReference(run->graph, run->inputs, run->overflow);
  } else {
    auto plain = unfusedJob(*job);
    if (!plain)
      return fail(plain.error());
    driver::ReferenceRunRequest plain_request = opts.request;
    plain_request.job = &*plain;
    auto plain_run = driver::prepareModelRun(plain_request);
    if (!plain_run)
      return fail(plain_run.error());
    got = debug::traceReference(run->graph, run->inputs, run->overflow);
    want = debug::traceReference(plain_run->graph, plain_run->inputs, plain_run->overflow);
  }
  if (!got)
    return fail(got.error());
  if (!want)
    return fail(want.error());
  debug::CompareReport report = debug::compareTraces(run->graph, *got, *want, tolerance);
  report.against = opts.against;
  if (opts.format == "json")
    std::cout << report.toJson().dump(2) << "\n";
  else
    printText(report.toText(opts.top));
  return 0;
}

void registerCompare(CLI::App &debug, Action &action) {
  auto opts = std::make_shared<CompareOptions>();
  CLI::App *cmd = debug.add_subcommand(
      "compare", "Compare the compiled kernels with the reference interpreter (or the fused "
                 "graph with the unfused one) value by value; name the first that diverges");
  addModelRunFlags(*cmd, opts->request);
  cmd->add_option("--against", opts->against,
                  "reference (compiled kernels vs the interpreter) or unfused (the job's fused "
                  "graph vs every fusion switched off, both on the interpreter)")
      ->check(OneOf({"reference", "unfused"}));
  cmd->add_option("--tol", opts->tolerance,
                  "relative and absolute tolerance (default by dtype: f32 1e-4, f16 1e-2, "
                  "bf16 5e-2)")
      ->check(FiniteNonNegative);
  cmd->add_option("--top", opts->top, "how many of the largest errors to list")
      ->check(NonNegativeInteger);
  cmd->add_option("--format", opts->format, "text or json")->check(OneOf({"text", "json"}));
  addJobFlags(*cmd, opts->job);
  addKernelFlags(*cmd, opts->cache);
  cmd->callback([opts, &action] { action = [opts] { return runCompare(*opts); }; });
}

struct BisectOptions {
  driver::ModelRequest model;
  std::string weights, inputs; // --check accuracy
  JobFlags job;
  driver::KernelSettings cache;
  std::string check = "compile";
  double tolerance = 1e-2;
  std::string format = "text";
};

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
Expected<driver::ResolvedJob> trialJob(const driver::JobSpec &job,
                                       const debug::BisectTrial &trial) {
  return driver::resolveJob(job.withPassesDisabled(trial.disabled));
}

// The outputs of a trial's compiled run.
using TrialOutputs = std::function<Expected<ops::TensorMap>(const driver::ResolvedJob &,
                                                            const debug::BisectTrial &)>;

// --check accuracy's reference and what it is: the run with every candidate
// off when it is finite (then only passes can make a difference), else that
// run under force_fp32. A reference that is itself inf or NaN would make a
// fix look like the culprit: it is an error.
Expected<std::pair<ops::TensorMap, std::string>>
accuracyReference(const driver::JobSpec &job, const std::vector<debug::BisectCandidate> &candidates,
                  const TrialOutputs &outputsOf) {
  debug::BisectTrial none;
  for (const debug::BisectCandidate &c : candidates)
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

int runBisect(const BisectOptions &opts) {
  const bool accuracy = opts.check == "accuracy";
  if (accuracy && (opts.weights.empty() || opts.inputs.empty()))
    return usage("--check accuracy runs the model: give --weights and --inputs");
  auto job = resolveJobFlags(opts.job, driver::kDefaultModelDType);
  if (!job)
    return fail(job.error());

  // The graph after the trial's passes, limited as the trial says.
  auto trialGraph = [&](const driver::ResolvedJob &trial_job,
                        const debug::BisectTrial &trial) -> Expected<Graph> {
    KILN_ASSIGN_OR_RETURN(Graph graph, driver::buildModelGraph(opts.model, trial_job));
    KILN_RETURN_IF_ERROR(driver::compileGraph(graph, trial_job).status());
    if (!trial.limited_pass.empty())
      KILN_RETURN_IF_ERROR(debug::keepFirstGroups(graph, trial.limited_pass, trial.keep_groups));
    return graph;
  };

  // Candidates: the job's enabled passes it may switch off, in run order, with
  // the groups each formed in the full job.
  Graph full("none");
  if (auto g = trialGraph(*job, {}))
    full = std::move(*g);
  std::vector<debug::BisectCandidate> candidates;
  for (const passes::Pass *p : job->registry->ordered()) {
    const passes::PassInfo &info = p->info();
    if (!info.may_disable || !job->context->decide(*p).enabled)
      continue;
    candidates.push_back({info.name, info.group,
                          static_cast<int64_t>(debug::groupsFormedBy(full, info.name).size())});
  }

  // --check accuracy: the compiled run's outputs, against the same run with
  // every candidate off (so only passes can make a difference).
  driver::ReferenceRunRequest request;
  request.model = opts.model.model;
  request.weights_path = opts.weights;
  request.inputs_path = opts.inputs;
  request.training = opts.model.training;
  TrialOutputs outputsOf = [&](const driver::ResolvedJob &trial_job,
                               const debug::BisectTrial &trial) -> Expected<ops::TensorMap> {
    driver::ReferenceRunRequest r = request;
    r.job = &trial_job;
    KILN_ASSIGN_OR_RETURN(driver::PreparedRun run, driver::prepareModelRun(r));
    if (!trial.limited_pass.empty())
      KILN_RETURN_IF_ERROR(
          debug::keepFirstGroups(run.graph, trial.limited_pass, trial.keep_groups));
    KILN_ASSIGN_OR_RETURN(driver::JobKernels kernels,
                          driver::compileJobKernels(run.graph, trial_job, opts.cache));
    KILN_ASSIGN_OR_RETURN(auto executor,
                          runtime::Executor::create(run.graph, std::move(kernels.kernels)));
    KILN_ASSIGN_OR_RETURN(ops::TensorMap outputs, executor->run(run.inputs));
    return driver::selectRunOutputs(std::move(outputs));
  };
  std::optional<ops::TensorMap> reference;
  std::string reference_name;
  if (accuracy) {
    auto ref = accuracyReference(job->spec, candidates, outputsOf);
    if (!ref)
      return fail(ref.error());
    std::tie(reference, reference_name) = std::move(*ref);
  }

  std::optional<Signature> baseline;
  debug::BisectPredicate fails = [&](const debug::BisectTrial &trial) -> Expected<bool> {
    KILN_ASSIGN_OR_RETURN(driver::ResolvedJob trial_job, trialJob(job->spec, trial));
    if (!accuracy) {
      KILN_ASSIGN_OR_RETURN(Graph graph, trialGraph(trial_job, trial));
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
      if (!firstMismatch(got.at(name), want, opts.tolerance, opts.tolerance).empty())
        return true;
    return false;
  };

  auto result = debug::bisect(candidates, fails, [&](const std::string &pass, int64_t n) {
    std::vector<std::string> names = debug::groupsFormedBy(full, pass);
    return n >= 1 && n <= static_cast<int64_t>(names.size()) ? names[n - 1] : std::string();
  });
  if (!result)
    return fail(result.error());
  result->reference = reference_name;
  // The job's own outputs are not finite even with every pass off (the
  // reference is force_fp32's): an overflow, which no pass switch fixes.
  if (accuracy && result->fails_without_passes && reference_name.rfind("force_fp32", 0) == 0)
    result->next_step = "the job's own outputs are not finite: 'kiln debug overflow' with the "
                        "same model, weights, inputs and flags names the op that overflows and "
                        "verifies fixes";
  return print(opts.format, *result);
}

void registerBisect(CLI::App &debug, Action &action) {
  auto opts = std::make_shared<BisectOptions>();
  CLI::App *cmd = debug.add_subcommand(
      "bisect", "Find the pass or rule that causes a compile failure or an accuracy regression: "
                "by group, by pass, then by the N-th group it formed");
  addModelFlags(*cmd, opts->model);
  cmd->add_option("--check", opts->check,
                  "compile (default: the job's compile error) or accuracy (outputs beyond --tol "
                  "from the same run with every switchable pass off, or from that run under "
                  "force_fp32 when it is not finite)")
      ->check(OneOf({"compile", "accuracy"}));
  cmd->add_option("--tol", opts->tolerance, "relative and absolute tolerance for accuracy")
      ->check(FiniteNonNegative);
  cmd->add_option("--weights", opts->weights, "safetensors with the parameters (accuracy)");
  cmd->add_option("--inputs", opts->inputs, "safetensors with input_ids (accuracy)");
  cmd->add_option("--format", opts->format, "text or json")->check(OneOf({"text", "json"}));
  addJobFlags(*cmd, opts->job);
  addKernelFlags(*cmd, opts->cache);
  cmd->callback([opts, &action] { action = [opts] { return runBisect(*opts); }; });
}

} // namespace

// MODEL, --weights, --inputs and --training, as kiln run takes them.
void addModelRunFlags(CLI::App &cmd, driver::ReferenceRunRequest &request) {
  addModelArgument(cmd, request.model, ModelArgument::AnyModel);
  cmd.add_option(
         "--weights", request.weights_path,
         "the parameters: a safetensors file, a sharded checkpoint's index, or the model folder")
      ->required();
  cmd.add_option("--inputs", request.inputs_path,
                 "safetensors with input_ids (i64 [B,S]) and optional labels")
      ->required();
  cmd.add_flag("--training", request.training, "forward and backward");
}

void registerDebugCommand(CLI::App &app, Action &action) {
  CLI::App *debug = app.add_subcommand(
      "debug", "Find what breaks a compile or a run: overflow, compare, bisect, reduce");
  debug->require_subcommand(1);
  registerDebugOverflow(*debug, action);
  registerCompare(*debug, action);
  registerBisect(*debug, action);
  registerDebugReduce(*debug, action);
  suggestOnUnknownArguments(*debug);
}

} // namespace kiln::cli
