#include "debug/overflow_job.h"

#include <filesystem>
#include <set>
#include <sstream>

#include "debug/job_run.h"
#include "debug/overflow_fixes.h"
#include "support/file_io.h"

namespace kiln::debug {
namespace {

// The step of the job `spec` compiled and run, with the float status.
Expected<StatusRun> runJobVariant(const OverflowJobRequest &request, const driver::JobSpec &spec,
                                  const ops::TensorMap *inputs_override = nullptr) {
  KILN_ASSIGN_OR_RETURN(CompiledRun compiled, compileModelRun(request.run, spec, request.cache));
  if (inputs_override)
    for (const auto &[name, t] : *inputs_override)
      compiled.run.inputs[name] = t;
  return runWithStatus(compiled.run.graph, std::move(compiled.kernels), compiled.run.inputs);
}

// The reference the fixes are checked against, named in `report`.
Expected<ops::TensorMap> fixReference(const OverflowJobRequest &request,
                                      const driver::ResolvedJob &job, OverflowReport &report) {
  driver::JobSpec fp32 = job.spec;
  fp32.flags.precision_mode = passes::PrecisionMode::ForceFp32;
  KILN_ASSIGN_OR_RETURN(StatusRun reference, runJobVariant(request, fp32));
  std::ostringstream tolerance;
  tolerance << request.tolerance;
  report.reference = "the force_fp32 run (tolerance " + tolerance.str() + ")";
  if (reference.overflowed) {
    driver::ReferenceRunRequest exact = request.run;
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
    if (isFloat(t.dtype()) && !rangeOf(name, t).finite())
      return Error("cannot verify the fixes: " + report.reference.substr(4) +
                   " of this step is not finite either ('" + name +
                   "'); the inputs or weights themselves overflow");
  return std::move(reference.outputs);
}

// Writes each keep_dtype fix as a --keep-dtype file, the job's own lines first.
Status writeKeepDtypeFiles(const OverflowJobRequest &request, const driver::ResolvedJob &job,
                           OverflowReport &report) {
  std::string keep_lines;
  if (job.effective.keep_dtype) {
    KILN_ASSIGN_OR_RETURN(std::string text, readFile(*job.effective.keep_dtype, 16 << 20));
    keep_lines = text + (text.empty() || text.back() == '\n' ? "" : "\n");
  }
  const std::string dir = request.dump_dir.empty() ? request.cache.dump_dir : request.dump_dir;
  int written = 0;
  for (FixCandidate &c : report.fixes) {
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
  return Status::ok();
}

// Re-runs the step with each fix the locator proposes and keeps its verdict.
Status verifyOverflowFixes(const OverflowJobRequest &request, const driver::ResolvedJob &job,
                           const driver::PreparedRun &run, OverflowReport &report) {
  // keep_dtype names nodes of the graph before the job's passes.
  driver::ReferenceRunRequest plain = request.run;
  plain.job = nullptr;
  KILN_ASSIGN_OR_RETURN(driver::PreparedRun unpassed, driver::prepareModelRun(plain));
  std::set<std::string> names;
  for (size_t n = 0; n < unpassed.graph.numNodes(); ++n)
    names.insert(unpassed.graph.node(static_cast<NodeId>(n)).name);
  report.fixes = fixCandidates(run.graph, report, overflowJobOf(job), run.inputs, names);
  if (report.fixes.empty())
    return Status::ok();
  KILN_ASSIGN_OR_RETURN(ops::TensorMap reference, fixReference(request, job, report));
  KILN_RETURN_IF_ERROR(writeKeepDtypeFiles(request, job, report));

  auto trial = [&](const FixCandidate &c) -> Expected<StatusRun> {
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
      return runJobVariant(request, variant, &scaled);
    }
    return runJobVariant(request, variant);
  };
  verifyFixes(report, reference, trial, request.tolerance);
  report.suggestions.clear();
  return Status::ok();
}

} // namespace

Expected<OverflowReport> locateJobOverflow(const OverflowJobRequest &request,
                                           const driver::ResolvedJob &job) {
  KILN_ASSIGN_OR_RETURN(CompiledRun compiled, compileModelRun(request.run, job, request.cache));
  OverflowOptions options;
  options.dump_dir = request.dump_dir;
  KILN_ASSIGN_OR_RETURN(OverflowReport report,
                        locateOverflow(compiled.run.graph, std::move(compiled.kernels),
                                       compiled.run.inputs, overflowJobOf(job), options));
  if (report.found && request.verify)
    KILN_RETURN_IF_ERROR(verifyOverflowFixes(request, job, compiled.run, report));
  return report;
}

} // namespace kiln::debug
