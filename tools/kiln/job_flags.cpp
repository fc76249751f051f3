#include "tools/kiln/job_flags.h"
#include "compiler/frontend/onnx/onnx_import.h"

#include "tools/kiln/cli_common.h"

namespace kiln::cli {

namespace {

// A comma-separated list of layer indices (>= 0) into `layers`.
void addLayerListFlag(CLI::App &cmd, const std::string &name,
                      std::optional<std::set<int64_t>> &layers, const std::string &help) {
  cmd.add_option_function<std::vector<int64_t>>(
         name,
         [name, &layers](const std::vector<int64_t> &list) {
           for (int64_t l : list)
             if (l < 0)
               throw CLI::ValidationError(name, "expected layer indices >= 0");
           layers = std::set<int64_t>(list.begin(), list.end());
         },
         help)
      ->delimiter(',')
      ->group("Job");
}

// CANN's precision settings (docs/precision.md).
void addPrecisionFlags(CLI::App &cmd, driver::JobSettings &s) {
  CLI::Option *v1 =
      cmd.add_option_function<std::string>(
             "--precision-mode",
             [&s](const std::string &m) {
               auto mode = passes::parsePrecisionMode(m);
               if (!mode)
                 throw CLI::ValidationError(
                     "--precision-mode", "unknown precision mode '" + m + "' (" +
                                             passes::precisionModeNames() +
                                             (passes::parsePrecisionModeV2(m)
                                                  ? "; '" + m + "' is a --precision-mode-v2 value"
                                                  : std::string()) +
                                             ")");
               s.precision_mode = *mode;
               s.precision_mode_written = "--precision-mode " + m;
             },
             "CANN precision_mode (default must_keep_origin_dtype)")
          ->group("Job");
  cmd.add_option_function<std::string>(
         "--precision-mode-v2",
         [&s](const std::string &m) {
           auto mode = passes::parsePrecisionModeV2(m);
           if (!mode)
             throw CLI::ValidationError("--precision-mode-v2",
                                        "unknown precision_mode_v2 '" + m + "' (" +
                                            passes::precisionModeV2Names() + ")");
           s.precision_mode = *mode;
           s.precision_mode_written = "--precision-mode-v2 " + m;
         },
         "CANN precision_mode_v2: fp16, origin, cube_fp16in_fp32out, mixed_float16, "
         "mixed_bfloat16 (docs/precision.md)")
      ->excludes(v1)
      ->group("Job");
  cmd.add_option_function<std::string>(
         "--modify-mixlist", [&s](const std::string &f) { s.modify_mixlist = f; },
         "CANN modify_mixlist JSON: edits of the white/black/gray lists")
      ->group("Job");
  cmd.add_option_function<std::string>(
         "--keep-dtype", [&s](const std::string &f) { s.keep_dtype = f; },
         "file of node names or OpType::X that keep their dtype")
      ->group("Job");
  addLayerListFlag(cmd, "--attention-fp32-layers", s.attention_fp32_layers,
                   "limit AttentionFp32CastPass to these layers (A,B,...)");
}

void addInstrumentationFlags(CLI::App &cmd, JobFlags &flags) {
  cmd.add_option("--print-ir-before", flags.print_ir_before,
                 "print the graph before these passes (NAME,...|all)")
      ->delimiter(',')
      ->group("Pass instrumentation");
  cmd.add_option("--print-ir-after", flags.print_ir_after,
                 "print the graph after these passes (NAME,...|all|changed)")
      ->delimiter(',')
      ->group("Pass instrumentation");
  cmd.add_flag("--pass-timing", flags.pass_timing, "print the time each pass took")
      ->group("Pass instrumentation");
  cmd.add_flag("--pass-statistics", flags.pass_statistics, "print each pass's counters")
      ->group("Pass instrumentation");
}

} // namespace

void addJobFlags(CLI::App &cmd, JobFlags &flags) {
  driver::JobSettings &s = flags.settings;
  cmd.add_option("--job", flags.job_file, "job file (docs/job.md)")->group("Job");
  cmd.add_option_function<std::string>(
         "--target", [&s](const std::string &t) { s.target = t; },
         "ascend910, ascend910b or a target .json (default ascend910b)")
      ->check(CLI::Validator(
          [](std::string &t) -> std::string {
            if (t.ends_with(".json"))
              return {}; // a file: read when the job resolves
            auto target = target::loadTarget(t);
            return target ? std::string() : target.error().message();
          },
          "NAME|FILE.json", "TARGET"))
      ->group("Job");
  addOptionalDTypeFlag(cmd, s.dtype)->group("Job");
  addOptionalOverflowFlag(cmd, s.overflow)->group("Job");
  addPrecisionFlags(cmd, s);
  cmd.add_option_function<std::string>(
         "--recompute",
         [&s](const std::string &m) {
           s.recompute = passes::parseRecomputeMode(m);
           if (!s.recompute)
             throw CLI::ValidationError("--recompute",
                                        "expected " + std::string(passes::kRecomputeModeNames) +
                                            ", got '" + m + "'");
         },
         "activation recomputation (RecomputePass): none, selective (the attention core) or "
         "full (each layer from its input); docs/training.md")
      ->group("Job");
  addLayerListFlag(cmd, "--recompute-layers", s.recompute_layers,
                   "limit --recompute to these layers (A,B,...)");
  cmd.add_option("--fusion-switch-file", flags.fusion_switch_file,
                 "CANN fusion switch file (JSON or one 'Name:off' a line)")
      ->group("Job");
  cmd.add_option("--enable-pass", s.enable_passes, "turn a pass on (repeatable, or A,B)")
      ->delimiter(',')
      ->group("Job");
  cmd.add_option("--disable-pass", s.disable_passes, "turn a pass off (repeatable, or A,B)")
      ->delimiter(',')
      ->group("Job");
  cmd.add_option_function<std::vector<std::string>>(
         "--pass-option",
         [&s](const std::vector<std::string> &settings) {
           for (const std::string &text : settings) {
             auto setting = passes::parsePassOptionSetting(text, "--pass-option " + text);
             if (!setting)
               throw CLI::ValidationError("--pass-option", setting.message());
             s.pass_options.push_back(std::move(*setting));
           }
         },
         "PASS.OPTION=VALUE: an option the pass declares (repeatable; kiln passes show PASS)")
      ->group("Job");
  cmd.add_option("--fusion-rules", s.fusion_rule_dirs, "a folder of fusion rules (repeatable)")
      ->group("Job");
  cmd.add_option("--custom-ops", s.custom_op_dirs,
                 "a folder of custom op definitions, docs/custom-ops.md (repeatable)")
      ->group("Job");
  cmd.add_flag("--allow-unknown-passes", s.allow_unknown_passes,
               "accept switch files naming passes kiln lacks, with a warning each")
      ->group("Job");
  addInstrumentationFlags(cmd, flags);
}

namespace {

// The flags without the settings a flag's value alone gives (the target by
// name, dtype, modes, layers, pass names): what the job files and folders
// the flags name make of the job.
driver::JobSettings fileSettingsOf(driver::JobSettings s) {
  if (s.target && !s.target->ends_with(".json"))
    s.target.reset();
  s.dtype.reset();
  s.overflow.reset();
  s.precision_mode.reset();
  s.precision_mode_written.clear();
  s.attention_fp32_layers.reset();
  s.recompute.reset();
  s.recompute_layers.reset();
  s.enable_passes.clear();
  s.disable_passes.clear();
  return s;
}

} // namespace

Expected<driver::ResolvedJob> resolveJobFlags(const JobFlags &flags, DType default_dtype) {
  KILN_ASSIGN_OR_RETURN(
      driver::JobSpec spec,
      driver::readJobSpec(flags.job_file, flags.fusion_switch_file, flags.settings, default_dtype));
  auto job = driver::resolveJob(spec);
  if (!job) {
    // A job that resolves without the flags' values but not with them was
    // refused for those values (a pass name kiln lacks, a pass both on and
    // off, a mode the target lacks): a usage error. One whose files are
    // wrong stays an error.
    driver::JobSpec without = spec;
    without.flags = fileSettingsOf(spec.flags);
    return driver::resolveJob(without) ? usageError(job.error()) : job.error();
  }
  // --print-ir-before/after name passes of the job's registry.
  passes::PassManager manager(*job->registry, *job->context, instrumentationOf(flags));
  if (Status named = manager.validate(); !named)
    return usageError(named.error());
  return job;
}

passes::Instrumentation instrumentationOf(const JobFlags &flags) {
  passes::Instrumentation inst;
  inst.print_before.insert(flags.print_ir_before.begin(), flags.print_ir_before.end());
  inst.print_after.insert(flags.print_ir_after.begin(), flags.print_ir_after.end());
  inst.timing = flags.pass_timing;
  inst.statistics = flags.pass_statistics;
  return inst;
}

void addModelFlags(CLI::App &cmd, driver::ModelRequest &model) {
  addModelArgument(cmd, model.model, ModelArgument::AnyModel);
  cmd.add_flag("--training", model.training, "the whole training step");
  cmd.add_option("--batch", model.batch, "batch size (a Hugging Face config)")
      ->check(PositiveInteger);
  cmd.add_option("--seq", model.seq, "sequence length (a Hugging Face config)")
      ->check(PositiveInteger);
  addInputShapeFlag(cmd, model.input_shapes);
}

void addInputShapeFlag(CLI::App &cmd, std::map<std::string, std::vector<int64_t>> &shapes) {
  cmd.add_option_function<std::vector<std::string>>(
      "--input-shape",
      [&shapes](const std::vector<std::string> &values) {
        for (const std::string &v : values) {
          auto parsed = frontend::parseInputShape(v);
          if (!parsed)
            throw CLI::ValidationError("--input-shape", parsed.message());
          if (!shapes.emplace(parsed->first, parsed->second).second)
            throw CLI::ValidationError("--input-shape",
                                       "names input '" + parsed->first + "' twice: give it once");
        }
      },
      "NAME:D0,D1,...: an ONNX model input's shape, binding its symbolic dimensions "
      "(repeatable)");
}

void addKernelFlags(CLI::App &cmd, driver::KernelSettings &settings) {
  cmd.add_option_function<std::string>(
         "--cache-dir", [&settings](const std::string &d) { settings.dir = d; },
         "kernel cache folder (default: KILN_CACHE_DIR, $XDG_CACHE_HOME/kiln, ~/.cache/kiln)")
      ->group("Kernel cache");
  cmd.add_option_function<std::string>(
         "--cache-mode",
         [&settings](const std::string &m) {
           auto mode = cache::parseCacheMode(m);
           if (!mode)
             throw CLI::ValidationError("--cache-mode", mode.message());
           settings.mode = *mode;
         },
         "enable (default), disable or force (recompile and overwrite), as CANN's "
         "op_compiler_cache_mode")
      ->group("Kernel cache");
  cmd.add_flag("--explain-cache-misses", settings.explain_misses,
               "say which key part differs for every kernel (and program) that missed")
      ->group("Kernel cache");
  cmd.add_option_function<std::string>(
         "--on-compile-error",
         [&settings](const std::string &m) {
           if (m != "fail" && m != "fallback")
             throw CLI::ValidationError("--on-compile-error",
                                        "expected fail or fallback, got '" + m + "'");
           settings.on_compile_error =
               m == "fail" ? codegen::OnCompileError::Fail : codegen::OnCompileError::Fallback;
         },
         "fail (default): a kernel the target cannot hold fails the compile; fallback: split "
         "it into single-op kernels, or run the op's reference kernel on the host, and list "
         "every fallback")
      ->group("Kernel cache");
  cmd.add_option("--kernel-dump-dir", settings.dump_dir,
                 "where the IR of a kernel that cannot be built is written (default kiln_dump; "
                 "'' for none)")
      ->group("Kernel cache");
}

} // namespace kiln::cli
