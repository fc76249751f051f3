// `kiln debug reduce`: shrink a model whose compile fails to a small graph
// that fails the same way, and write it out as a reproducer folder.
#include <iostream>

#include "compiler/driver/compile.h"
#include "compiler/driver/kernels.h"
#include "debug/graph_reducer.h"
#include "debug/repro.h"
#include "tools/kiln/cli_common.h"
#include "tools/kiln/job_flags.h"

namespace kiln::cli {
namespace {

struct ReduceOptions {
  driver::ModelRequest model;
  JobFlags job;
  std::string output;
  int max_trials = 5000;
};

// What "the same failure" means: a kernel with the first failure's code,
// kind and forming pass. Node names and numbers may change as it shrinks.
struct FailureSignature {
  std::string code, kind, formed_by;

  bool matches(const std::vector<codegen::KernelDiagnostic> &failures) const {
    for (const codegen::KernelDiagnostic &d : failures)
      if (d.code == code && d.kind == kind && d.formed_by == formed_by)
        return true;
    return false;
  }
  std::string toString() const {
    return code + " in a " + kind + " kernel" +
           (formed_by.empty() ? "" : " formed by " + formed_by);
  }
};

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

int runReduce(const ReduceOptions &opts) {
  auto job = resolveJobFlags(opts.job, driver::kDefaultModelDType);
  if (!job)
    return fail(job.error());
  auto graph = driver::buildModelGraph(opts.model, *job);
  if (!graph)
    return fail(graph.error());
  auto failures = driver::kernelFailures(*graph, *job);
  if (!failures)
    return fail(failures.error());
  if (failures->empty())
    return fail(opts.model.model + ": every kernel of the job fits the target; kiln debug "
                                   "reduce needs a compile that fails");
  const codegen::KernelDiagnostic &first = failures->front();
  const FailureSignature signature{first.code, first.kind, first.formed_by};

  debug::ReduceOptions options;
  options.max_trials = opts.max_trials;
  for (const codegen::KernelMember &m : first.members)
    options.focus.push_back(m.name);
  auto reduced = debug::reduceGraph(
      *graph,
      [&](const Graph &candidate) -> Expected<bool> {
        // A cut-out graph lacks most nodes a keep_dtype file or layer list names.
        auto found = driver::kernelFailures(candidate, *job, /*check_settings=*/false);
        return found && signature.matches(*found); // a pass error is another failure
      },
      options);
  if (!reduced)
    return fail(reduced.error());

  auto now_failing = driver::kernelFailures(reduced->graph, *job, /*check_settings=*/false);
  if (!now_failing)
    return fail(now_failing.error());
  debug::ReproNotes notes;
  for (const codegen::KernelDiagnostic &d : *now_failing)
    if (signature.matches({d})) {
      codegen::KernelDiagnostic shown = d;
      shown.ir_dump.clear();
      notes.failure = shown.toString();
      break;
    }
  notes.origin = opts.model.model + (opts.model.training ? " --training" : "") +
                 (opts.model.seq > 0 ? " --seq " + std::to_string(opts.model.seq) : "") +
                 (opts.model.batch != 1 ? " --batch " + std::to_string(opts.model.batch) : "");
  notes.reduction = std::to_string(reduced->nodes_before) + " nodes to " +
                    std::to_string(reduced->graph.numNodes()) + " in " +
                    std::to_string(reduced->trials) + " trials";
  if (Status s = debug::writeRepro(opts.output, reduced->graph, *job, notes); !s)
    return fail(s.error());
  if (Status s = checkRepro(opts.output, signature); !s)
    return fail(s.error());

  for (const std::string &line : reduced->log)
    printText("  " + line + "\n");
  std::cout << "reduced " << notes.reduction << ", keeping " << signature.toString() << "\n"
            << "wrote " << opts.output << "/{graph.json,job.json,README.md}; reproduce with:\n"
            << "  cd " << opts.output << " && kiln compile graph.json --job job.json\n";
  return 0;
}

} // namespace

void registerDebugReduce(CLI::App &debug, Action &action) {
  auto opts = std::make_shared<ReduceOptions>();
  CLI::App *cmd = debug.add_subcommand(
      "reduce", "Shrink a model whose kernels cannot be built to a small graph that fails the "
                "same way (delta debugging) and write a reproducer folder");
  addModelFlags(*cmd, opts->model);
  cmd->add_option("-o,--output", opts->output,
                  "the reproducer folder: graph.json, job.json, README.md")
      ->required();
  cmd->add_option("--max-trials", opts->max_trials, "stop shrinking after this many trials")
      ->check(PositiveInteger);
  addJobFlags(*cmd, opts->job);
  cmd->callback([opts, &action] { action = [opts] { return runReduce(*opts); }; });
}

} // namespace kiln::cli
