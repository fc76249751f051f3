// A compile job: the target, the precision settings and the fusion switches
// of one run of kiln, from a job file (docs/job.md) and command-line flags.
// Resolving a job yields the pass registry (built-in passes plus fusion
// rules) and the PassContext the pass manager runs with.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ir/dtype.h"
#include "ops/op_registry.h"
#include "passes/memory/recompute_settings.h"
#include "passes/pass_context.h"
#include "passes/pass_options.h"
#include "passes/pass_registry.h"
#include "passes/pass_switches.h"
#include "passes/precision/precision_settings.h"
#include "support/error.h"
#include "target/target.h"

namespace kiln::driver {

// The model's dtype when neither --dtype nor the job file sets one, in every
// command alike (graph, init, make-inputs, compile, run, train, plan, passes,
// debug): the model as Hugging Face writes it, f32. Lower precision is asked
// for: --dtype f16|bf16, or a precision mode that lowers what may run low.
// One rule, so kiln compile, kiln run and kiln train of one model build the
// same program (and share the program cache), and kiln plan plans what
// kiln train runs.
inline constexpr DType kDefaultModelDType = DType::F32;

// What a job file or the command line asks for; unset fields take the
// layer below (command line > job file > target default).
struct JobSettings {
  std::string source; // the job file, for messages
  std::optional<std::string> target;
  std::optional<DType> dtype;
  std::optional<OverflowMode> overflow;
  std::optional<passes::PrecisionMode> precision_mode;
  // How precision_mode was written, for messages: "--precision-mode-v2 mixed_bf16",
  // "job.json: $.precision.precision_mode \"force_fp16\"" (empty: not set).
  std::string precision_mode_written;
  std::optional<std::string> modify_mixlist; // CANN modify_mixlist JSON
  std::optional<std::string> keep_dtype;     // one node name or OpType::X a line
  std::optional<std::set<int64_t>> attention_fp32_layers;
  // RecomputePass (job file "recompute": a mode, or MindFormers' list of
  // layers; --recompute, --recompute-layers).
  std::optional<passes::RecomputeMode> recompute;
  std::optional<std::set<int64_t>> recompute_layers;
  // Sequence parallelism inside the tensor-parallel groups of a training
  // layout (job file "sequence_parallel", MindFormers' use_seq_parallel;
  // --sequence-parallel).
  std::optional<bool> sequence_parallel;
  // CANN-format switch settings (job file "fusion_switch", --fusion-switch-file).
  std::optional<passes::SwitchLayer> fusion_switch;
  std::vector<std::string> enable_passes;
  std::vector<std::string> disable_passes;
  std::vector<std::string> fusion_rule_dirs; // folders of fusion rules
  std::vector<std::string> custom_op_dirs;   // folders of custom ops (docs/custom-ops.md)
  bool allow_unknown_passes = false;
  // Pass options (job file "pass_options", --pass-option PASS.OPTION=VALUE;
  // job_pass_options.h), in the order written.
  std::vector<passes::PassOptionSetting> pass_options;
};

// Reads a job file; relative paths in it are relative to the file's folder.
// Unknown fields and ill-typed values are errors naming the file and the
// JSON path.
Expected<JobSettings> readJobFile(const std::string &path);
Expected<JobSettings> parseJob(const nlohmann::json &doc, const std::string &source,
                               const std::string &base_dir);

// What the user said about one job, with where each part came from: the job
// file's settings (already read: its source and paths resolved) and the
// command line's flags (their switch file read), and the dtype the command
// defaults to. resolveJob turns it into a ResolvedJob; a variant of a job (a
// bisection trial, the unfused reference, another recomputation) is an edit
// of its spec, resolved again, and never re-reads the job or switch files.
struct JobSpec {
  std::optional<JobSettings> file;
  JobSettings flags; // source "command line"
  DType default_dtype = kDefaultModelDType;
  // The custom op folders as resolving last loaded them, so that a variant
  // resolved from a ResolvedJob's spec reads no op file again; used only
  // while the spec names the same folders.
  struct LoadedOps {
    std::vector<std::string> dirs;
    std::shared_ptr<const ops::OpRegistry> ops;
  };
  std::optional<LoadedOps> loaded_ops;

  // `passes` switched off on the command line (taken out of its enable list).
  JobSpec withPassesDisabled(const std::vector<std::string> &passes) const;
};

// The spec of `job_file` (may be empty) and the flags, with the flags'
// `--fusion-switch-file` (may be empty) read: every file the spec names is
// read here, once.
Expected<JobSpec> readJobSpec(const std::string &job_file, const std::string &switch_file,
                              JobSettings flags, DType default_dtype);

struct ResolvedJob {
  JobSpec spec; // what it was resolved from: the base of its variants
  target::Target target;
  DType dtype = DType::F16;
  OverflowMode overflow = OverflowMode::InfNan;
  // The job's custom ops over the built-in ones (null: it has none): the
  // vocabulary its graphs are written in. Resolving loads them here only;
  // nothing is registered process-wide.
  std::shared_ptr<const ops::OpRegistry> ops;
  // The registry must outlive `context`'s users; both live here.
  std::shared_ptr<passes::PassRegistry> registry;
  std::shared_ptr<passes::PassContext> context;
  std::vector<std::string> warnings; // e.g. unknown passes accepted
  // The settings in effect, layers merged and paths resolved: what a job
  // file repeating this job must say (the pass states are `context`'s).
  JobSettings effective;
};

// Layers, lowest precedence first: built-in defaults, fusion_rules/'s default
// switch file (and that of each rule folder), the job file's fusion_switch and
// pass lists, then the command line's switch file and pass lists. Errors: an
// unknown target, a dtype or overflow mode the target lacks, bad rule folders
// and every switch error of passes::resolveSwitches. The job's custom ops
// (the job file's folders, then the command line's) are loaded first, so
// rules may name them and graphs read afterwards may use them.
// `default_dtype` is the model's dtype when neither sets one (every kiln
// command passes kDefaultModelDType); a precision mode other than
// must_keep_origin_dtype builds the model in f32 (fp32 master weights)
// unless a dtype is given.
Expected<ResolvedJob> resolveJob(const JobSpec &spec);
Expected<ResolvedJob> resolveJob(const std::optional<JobSettings> &job_file,
                                 const JobSettings &command_line, DType default_dtype);

// What every compile and train banner states about the job, so that no
// default changes under the user unseen: "f16 model, precision
// must_keep_origin_dtype, recompute none" (the target is the banner's).
std::string numericsSummary(const ResolvedJob &job);

// `job` with recomputation `mode` (its layer list kept), in a context of its
// own: a variant to plan beside the job without changing it.
ResolvedJob withRecompute(const ResolvedJob &job, passes::RecomputeMode mode);

} // namespace kiln::driver
