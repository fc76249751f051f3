// `kiln debug overflow`: finds the first op that overflows (debug/overflow_locator.h)
// and re-runs the step with each candidate fix (debug/overflow_fixes.h).
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>

#include "compiler/driver/kernels.h"
#include "compiler/driver/reference_run.h"
#include "debug/overflow_fixes.h"
#include "debug/overflow_locator.h"
#include "ir/file_io.h"
#include "tools/kiln/cli_common.h"
#include "tools/kiln/job_flags.h"

namespace kiln::cli {
namespace {

struct OverflowOptions {
  driver::ReferenceRunRequest request;
  JobFlags job;
  driver::KernelSettings cache;
  std::string dump_dir;
  std::string format = "text";
  bool verify = true;
  double tolerance = 1e-2;
};

// The step of the job `spec` compiled and run, with the float status.
Expected<debug::StatusRun> runJobVariant(const OverflowOptions &opts, const driver::JobSpec &spec,
                                         const ops::TensorMap *inputs_override = nullptr) {
  KILN_ASSIGN_OR_RETURN(driver::ResolvedJob job, driver::resolveJob(spec));
  driver::ReferenceRunRequest request = opts.request;
  request.job = &job;
  KILN_ASSIGN_OR_RETURN(driver::PreparedRun run, driver::prepareModelRun(request));
  KILN_ASSIGN_OR_RETURN(driver::JobKernels kernels,
                        driver::compileJobKernels(run.graph, job, opts.cache));
  if (inputs_override)
    for (const auto &[name, t] : *inputs_override)
      run.inputs[name] = t;
  return debug::runWithStatus(run.graph, std::move(kernels.kernels), run.inputs);
}

// Re-runs the step with each fix the locator proposes and keeps its verdict.
Status verifyOverflowFixes(const OverflowOptions &opts, const driver::ResolvedJob &job,
                           const driver::PreparedRun &run, debug::OverflowReport &report) {
  // keep_dtype names nodes of the graph before the job's passes.
  driver::ReferenceRunRequest plain = opts.request;
  plain.job = nullptr;
  KILN_ASSIGN_OR_RETURN(driver::PreparedRun unpassed, driver::prepareModelRun(plain));
  std::set<std::string> names;
  for (size_t n = 0; n < unpassed.graph.numNodes(); ++n)
    names.insert(unpassed.graph.node(static_cast<NodeId>(n)).name);
  report.fixes =
      debug::fixCandidates(run.graph, report, debug::overflowJobOf(job), run.inputs, names);
  if (report.fixes.empty())
    return Status::ok();

  // The reference: the job's force_fp32 run; where that overflows too (a
  // cube that takes only f16 inputs casts them down), the exact f32 run.
  driver::JobSpec fp32 = job.spec;
  fp32.flags.precision_mode = passes::PrecisionMode::ForceFp32;
  KILN_ASSIGN_OR_RETURN(debug::StatusRun reference, runJobVariant(opts, fp32));
  std::ostringstream tolerance;
  tolerance << opts.tolerance;
  report.reference = "the force_fp32 run (tolerance " + tolerance.str() + ")";
  if (reference.overflowed) {
    driver::ReferenceRunRequest exact = opts.request;
    exact.job = nullptr;
    exact.dtype = DType::F32;
    KILN_ASSIGN_OR_RETURN(reference.outputs, driver::runReference(exact));
    report.reference = "the exact f32 run (tolerance " + tolerance.str() + ")";
    report.reference_note =
        "force_fp32 overflows too on " + job.target.name +
        (job.target.cubeTakes(DType::F32)
             ? ""
             : ", whose cube unit takes only f16 inputs: values past 65504 at a matmul input "
               "cannot be kept in fp32 there; shrink them at their source (the weights or "
               "learning rate that grew them), or train on a target with bf16");
  }
  for (const auto &[name, t] : reference.outputs)
    if (isFloat(t.dtype()) && !debug::rangeOf(name, t).finite())
      return Error("cannot verify the fixes: " + report.reference.substr(4) +
                   " of this step is not finite either ('" + name +
                   "'); the inputs or weights themselves overflow");

  // The job's own keep_dtype lines stay in every variant's file.
  std::string keep_lines;
  if (job.effective.keep_dtype) {
    auto text = readFile(*job.effective.keep_dtype, 16 << 20);
    if (!text)
      return text.error();
    keep_lines = *text + (text->empty() || text->back() == '\n' ? "" : "\n");
  }
  const std::string dir = opts.dump_dir.empty() ? opts.cache.dump_dir : opts.dump_dir;
  int written = 0;
  for (debug::FixCandidate &c : report.fixes) {
    if (c.keep_dtype.empty())
      continue;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    const std::string path =
        (std::filesystem::path(dir) / ("keep_dtype." + std::to_string(++written) + ".txt"))
            .string();
    std::string text = keep_lines;
    for (const std::string &line : c.keep_dtype)
      text += line + "\n";
    KILN_RETURN_IF_ERROR(writeFileAtomic(path, text));
    c.keep_dtype_file = path;
    c.flags = "--keep-dtype " + path;
  }

  auto trial = [&](const debug::FixCandidate &c) -> Expected<debug::StatusRun> {
    driver::JobSpec variant = job.spec;
    driver::JobSettings &flags = variant.flags;
    if (!c.keep_dtype_file.empty())
      flags.keep_dtype = c.keep_dtype_file;
    if (!c.precision_mode.empty())
      flags.precision_mode = passes::parsePrecisionMode(c.precision_mode);
    for (const std::string &pass : c.enable_passes) {
      std::erase(flags.disable_passes, pass);
      flags.enable_passes.push_back(pass);
    }
    if (!c.attention_fp32_layers.empty() || c.every_attention_layer)
      flags.attention_fp32_layers = c.attention_fp32_layers; // empty: every layer
    if (c.loss_scale > 0) {
      ops::TensorMap scaled = {{"loss_scale", Tensor::scalar(DType::F32, c.loss_scale)}};
      return runJobVariant(opts, variant, &scaled);
    }
    return runJobVariant(opts, variant);
  };
  debug::verifyFixes(report, reference.outputs, trial, opts.tolerance);
  report.suggestions.clear();
  return Status::ok();
}

int runOverflow(const OverflowOptions &opts) {
  auto job = resolveJobFlags(opts.job, driver::kDefaultModelDType);
  if (!job)
    return fail(job.error());
  driver::ReferenceRunRequest request = opts.request;
  request.job = &*job;
  auto run = driver::prepareModelRun(request);
  if (!run)
    return fail(run.error());
  auto kernels = driver::compileJobKernels(run->graph, *job, opts.cache);
  if (!kernels)
    return fail(kernels.error());
  debug::OverflowOptions options;
  options.dump_dir = opts.dump_dir;
  auto report = debug::locateOverflow(run->graph, std::move(kernels->kernels), run->inputs,
                                      debug::overflowJobOf(*job), options);
  if (!report)
    return fail(report.error());
  if (report->found && opts.verify)
    if (Status s = verifyOverflowFixes(opts, *job, *run, *report); !s)
      return fail(s.error());
  if (opts.format == "json")
    std::cout << report->toJson().dump(2) << "\n";
  else
    printText(report->toText());
  return report->found ? kExitOverflowFound : kExitOk;
}

} // namespace

void registerDebugOverflow(CLI::App &debug, Action &action) {
  auto opts = std::make_shared<OverflowOptions>();
  CLI::App *cmd = debug.add_subcommand(
      "overflow", "Run with the float status and a finite check after every kernel, name the "
                  "first op that overflows and verify fixes for it (exit code 3 when found)");
  addModelRunFlags(*cmd, opts->request);
  cmd->add_option("--dump-dir", opts->dump_dir,
                  "write the overflowing op's inputs and outputs here (safetensors)");
  cmd->add_option("--format", opts->format, "text or json")->check(OneOf({"text", "json"}));
  cmd->add_flag("!--no-verify", opts->verify,
                "only suggest fixes; do not re-run the step with each one");
  cmd->add_option("--fix-tolerance", opts->tolerance,
                  "a fix must give a loss within this relative distance of force_fp32's")
      ->check(FinitePositive);
  addJobFlags(*cmd, opts->job);
  addKernelFlags(*cmd, opts->cache);
  cmd->callback([opts, &action] { action = [opts] { return runOverflow(*opts); }; });
}

} // namespace kiln::cli
