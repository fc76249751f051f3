#include "compiler/driver/job.h"

#include <cassert>
#include <filesystem>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "compiler/driver/job_pass_options.h"
#include "compiler/frontend/custom_ops.h"
#include "passes/fusion/rules/embedded_rules.h"
#include "passes/fusion/rules/rule_loader.h"
#include "support/file_io.h"
#include "support/json_reader.h"

namespace kiln::driver {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string resolvePath(const std::string &base_dir, const std::string &path) {
  if (path.empty() || fs::path(path).is_absolute() || base_dir.empty())
    return path;
  return (fs::path(base_dir) / path).string();
}

Expected<std::vector<std::string>> passList(const JsonReader &r, const json &doc, const char *key) {
  KILN_ASSIGN_OR_RETURN(const json *v, r.optionalMember(doc, "$", key));
  if (!v)
    return std::vector<std::string>{};
  return r.stringList(*v, JsonReader::child("$", key));
}

// A layer of single-pass settings that must all name known passes.
passes::SwitchLayer passListLayer(const std::string &source, const std::vector<std::string> &enable,
                                  const std::vector<std::string> &disable,
                                  const std::string &enable_where,
                                  const std::string &disable_where) {
  passes::SwitchLayer layer;
  layer.source = source;
  layer.cann_format = false;
  auto add = [&](const std::vector<std::string> &names, bool on, const std::string &where) {
    for (const std::string &n : names) {
      layer.passes.push_back({n, on});
      layer.locations.push_back(where);
      layer.listed_groups.push_back(std::nullopt);
    }
  };
  add(enable, true, enable_where);
  add(disable, false, disable_where);
  return layer;
}

Status checkNotBoth(const std::string &source, const std::vector<std::string> &enable,
                    const std::vector<std::string> &disable) {
  for (const std::string &n : enable)
    for (const std::string &m : disable)
      if (n == m)
        return Error(source + ": pass '" + n + "' is both enabled and disabled");
  return Status::ok();
}

// An array of layer indices (>= 0).
Expected<std::set<int64_t>> layerSet(const JsonReader &r, const json &layers,
                                     const std::string &path) {
  if (!layers.is_array())
    return r.error(path, "expected an array of layer indices");
  std::set<int64_t> set;
  for (size_t i = 0; i < layers.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(int64_t l, r.integer(layers[i], r.index(path, i)));
    if (l < 0)
      return r.error(r.index(path, i), "expected a layer >= 0");
    set.insert(l);
  }
  return set;
}

// $.precision: the dtype, the overflow and precision modes, and the files
// that refine them.
Status parsePrecision(const JsonReader &r, const json &doc, const std::string &source,
                      const std::string &base_dir, JobSettings &job) {
  if (!doc.contains("precision"))
    return Status::ok();
  KILN_ASSIGN_OR_RETURN(const json *p, r.object(doc, "$", "precision"));
  KILN_RETURN_IF_ERROR(r.checkKeys(*p, "$.precision",
                                   {"dtype", "overflow_mode", "precision_mode", "precision_mode_v2",
                                    "modify_mixlist", "keep_dtype", "attention_fp32_layers"}));
  if (p->contains("precision_mode") && p->contains("precision_mode_v2"))
    return r.error("$.precision.precision_mode_v2",
                   "precision_mode and precision_mode_v2 are two spellings of one setting (as "
                   "in CANN, give only one)");
  if (p->contains("precision_mode")) {
    KILN_ASSIGN_OR_RETURN(std::string m, r.string(*p, "$.precision", "precision_mode"));
    auto mode = passes::parsePrecisionMode(m);
    if (!mode)
      return r.error("$.precision.precision_mode",
                     "unknown precision mode \"" + m + "\" (" + passes::precisionModeNames() +
                         (passes::parsePrecisionModeV2(m)
                              ? "; \"" + m + "\" is a precision_mode_v2 value"
                              : std::string()) +
                         ")");
    job.precision_mode = *mode;
    job.precision_mode_written = source + ": $.precision.precision_mode \"" + m + "\"";
  }
  if (p->contains("precision_mode_v2")) {
    KILN_ASSIGN_OR_RETURN(std::string m, r.string(*p, "$.precision", "precision_mode_v2"));
    auto mode = passes::parsePrecisionModeV2(m);
    if (!mode)
      return r.error("$.precision.precision_mode_v2", "unknown precision_mode_v2 \"" + m + "\" (" +
                                                          passes::precisionModeV2Names() + ")");
    job.precision_mode = *mode;
    job.precision_mode_written = source + ": $.precision.precision_mode_v2 \"" + m + "\"";
  }
  for (const char *key : {"modify_mixlist", "keep_dtype"}) {
    if (!p->contains(key))
      continue;
    KILN_ASSIGN_OR_RETURN(std::string path, r.string(*p, "$.precision", key));
    (std::string(key) == "keep_dtype" ? job.keep_dtype : job.modify_mixlist) =
        resolvePath(base_dir, path);
  }
  if (p->contains("attention_fp32_layers")) {
    KILN_ASSIGN_OR_RETURN(job.attention_fp32_layers, layerSet(r, (*p)["attention_fp32_layers"],
                                                              "$.precision.attention_fp32_layers"));
  }
  if (p->contains("dtype")) {
    KILN_ASSIGN_OR_RETURN(std::string d, r.string(*p, "$.precision", "dtype"));
    auto dtype = parseDType(d);
    if (!dtype || !isFloat(*dtype))
      return r.error("$.precision.dtype", "expected f32, f16 or bf16, got \"" + d + "\"");
    job.dtype = *dtype;
  }
  if (p->contains("overflow_mode")) {
    KILN_ASSIGN_OR_RETURN(std::string m, r.string(*p, "$.precision", "overflow_mode"));
    auto mode = parseOverflowMode(m);
    if (!mode)
      return r.error("$.precision.overflow_mode",
                     "expected \"infnan\" or \"saturation\", got \"" + m + "\"");
    job.overflow = *mode;
  }
  return Status::ok();
}

// $.recompute: a mode, or MindFormers' list of layers.
Status parseRecompute(const JsonReader &r, const json &doc, JobSettings &job) {
  if (auto it = doc.find("recompute"); it != doc.end()) {
    // A mode, or MindFormers' list form: the layers recomputed in full.
    if (it->is_array()) {
      job.recompute = passes::RecomputeMode::Full;
      KILN_ASSIGN_OR_RETURN(job.recompute_layers, layerSet(r, *it, "$.recompute"));
    } else {
      KILN_ASSIGN_OR_RETURN(std::string m, r.string(doc, "$", "recompute"));
      job.recompute = passes::parseRecomputeMode(m);
      if (!job.recompute)
        return r.error("$.recompute", "expected " + std::string(passes::kRecomputeModeNames) +
                                          " or an array of layer indices, got \"" + m + "\"");
    }
  }
  return Status::ok();
}

// $.fusion_switch: CANN's Switch object, inline or in a file.
Status parseFusionSwitch(const JsonReader &r, const json &doc, const std::string &source,
                         const std::string &base_dir, JobSettings &job) {
  if (auto it = doc.find("fusion_switch"); it != doc.end()) {
    if (it->is_string()) {
      auto layer = passes::readSwitchFile(resolvePath(base_dir, it->get<std::string>()));
      if (!layer)
        return layer.error().withContext(source + ": $.fusion_switch");
      job.fusion_switch = std::move(*layer);
    } else if (it->is_object()) {
      // Either CANN's whole file {"Switch": {...}} or just the Switch object.
      if (it->contains("Switch")) {
        KILN_ASSIGN_OR_RETURN(job.fusion_switch,
                              passes::parseSwitchObject(*it, source, "$.fusion_switch"));
      } else {
        KILN_ASSIGN_OR_RETURN(job.fusion_switch,
                              passes::parseSwitchGroups(*it, source, "$.fusion_switch"));
      }
    } else {
      return r.error("$.fusion_switch",
                     "expected CANN's Switch object or the path of a switch file");
    }
  }
  return Status::ok();
}

} // namespace

Expected<JobSettings> parseJob(const json &doc, const std::string &source,
                               const std::string &base_dir) {
  JsonReader r(source);
  KILN_RETURN_IF_ERROR(
      r.checkKeys(doc, "$",
                  {"format", "version", "name", "target", "precision", "fusion_switch",
                   "enable_passes", "disable_passes", "fusion_rules", "custom_ops",
                   "allow_unknown_passes", "recompute", "sequence_parallel", "pass_options"}));
  JobSettings job;
  job.source = source;
  if (doc.contains("format")) {
    KILN_ASSIGN_OR_RETURN(std::string format, r.string(doc, "$", "format"));
    if (format != "kiln.job")
      return r.error("$.format", "expected \"kiln.job\", got \"" + format + "\"");
  }
  if (doc.contains("version") && doc["version"] != 1)
    return r.error("$.version", "unsupported version (this kiln reads version 1)");
  if (doc.contains("target")) {
    KILN_ASSIGN_OR_RETURN(std::string t, r.string(doc, "$", "target"));
    job.target = t.size() > 5 && t.substr(t.size() - 5) == ".json" ? resolvePath(base_dir, t) : t;
  }
  KILN_RETURN_IF_ERROR(parsePrecision(r, doc, source, base_dir, job));
  KILN_RETURN_IF_ERROR(parseRecompute(r, doc, job));
  KILN_ASSIGN_OR_RETURN(job.pass_options, parsePassOptions(r, doc, source));
  KILN_RETURN_IF_ERROR(parseFusionSwitch(r, doc, source, base_dir, job));
  KILN_ASSIGN_OR_RETURN(job.enable_passes, passList(r, doc, "enable_passes"));
  KILN_ASSIGN_OR_RETURN(job.disable_passes, passList(r, doc, "disable_passes"));
  KILN_RETURN_IF_ERROR(checkNotBoth(source, job.enable_passes, job.disable_passes));
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> dirs, passList(r, doc, "fusion_rules"));
  for (const std::string &d : dirs)
    job.fusion_rule_dirs.push_back(resolvePath(base_dir, d));
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> op_dirs, passList(r, doc, "custom_ops"));
  for (const std::string &d : op_dirs)
    job.custom_op_dirs.push_back(resolvePath(base_dir, d));
  if (doc.contains("allow_unknown_passes")) {
    KILN_ASSIGN_OR_RETURN(job.allow_unknown_passes, r.boolean(doc, "$", "allow_unknown_passes"));
  }
  if (doc.contains("sequence_parallel")) {
    KILN_ASSIGN_OR_RETURN(job.sequence_parallel, r.boolean(doc, "$", "sequence_parallel"));
  }
  return job;
}

Expected<JobSettings> readJobFile(const std::string &path) {
  KILN_ASSIGN_OR_RETURN(json doc, readJsonFile(path));
  return parseJob(doc, path, fs::path(path).parent_path().string());
}

namespace {

// "f16, bf16" of `items`, by `name`.
template <typename T, typename Name>
std::string listOf(const std::vector<T> &items, Name name, bool (*keep)(T) = nullptr) {
  std::string s;
  for (const T &item : items)
    if (!keep || keep(item))
      s += (s.empty() ? "" : ", ") + std::string(name(item));
  return s;
}

// The precision mode, the model's dtype and the overflow mode, checked
// against the target; the command line over the job file over the defaults.
Status resolveNumerics(const JobSettings &job, const JobSettings &command_line, DType default_dtype,
                       ResolvedJob &resolved, passes::PrecisionMode &mode) {
  mode = command_line.precision_mode.value_or(
      job.precision_mode.value_or(passes::PrecisionMode::MustKeepOriginDType));
  const std::string &mode_written = command_line.precision_mode
                                        ? command_line.precision_mode_written
                                        : job.precision_mode_written;
  if (mode != passes::PrecisionMode::MustKeepOriginDType)
    default_dtype = DType::F32; // fp32 master weights; the mode lowers what may run low
  resolved.dtype = command_line.dtype.value_or(job.dtype.value_or(default_dtype));
  if (std::optional<DType> low = passes::lowDType(mode); low && !resolved.target.supports(*low)) {
    const std::string name(passes::precisionModeName(mode));
    std::string what = "precision mode " + name;
    if (!mode_written.empty() && mode_written.find(name) == std::string::npos)
      what = mode_written + " (precision mode " + name + ")";
    else if (!mode_written.empty())
      what = mode_written;
    return Error(what + " needs " + std::string(dtypeName(*low)) + ", which target " +
                 resolved.target.name + " does not have" +
                 (*low == DType::BF16 ? " (use allow_mix_precision_fp16 = mixed_float16, with "
                                        "loss scaling)"
                                      : std::string()));
  }
  if (!resolved.target.supports(resolved.dtype))
    return Error("target " + resolved.target.name + " has no " +
                 std::string(dtypeName(resolved.dtype)) + " (it computes in " +
                 listOf(resolved.target.dtypes, dtypeName, isFloat) + ")");
  resolved.overflow =
      command_line.overflow.value_or(job.overflow.value_or(resolved.target.default_overflow_mode));
  if (!resolved.target.supports(resolved.overflow))
    return Error("target " + resolved.target.name + " does not support overflow mode " +
                 std::string(overflowModeName(resolved.overflow)) + " (it has " +
                 listOf(resolved.target.overflow_modes, overflowModeName) + ")");
  return Status::ok();
}

// The precision pass's settings: the mode and the files that refine it.
Expected<passes::PrecisionSettings> resolvePrecision(const JobSettings &job,
                                                     const JobSettings &command_line,
                                                     passes::PrecisionMode mode,
                                                     const ops::OpRegistry &ops) {
  passes::PrecisionSettings precision;
  precision.mode = mode;
  if (auto path = command_line.modify_mixlist ? command_line.modify_mixlist : job.modify_mixlist) {
    KILN_ASSIGN_OR_RETURN(precision.mixlist,
                          passes::readModifyMixlist(*path, std::move(precision.mixlist), ops));
  }
  if (auto path = command_line.keep_dtype ? command_line.keep_dtype : job.keep_dtype) {
    KILN_ASSIGN_OR_RETURN(precision.keep_dtype, passes::readKeepDType(*path, ops));
  }
  return precision;
}

// The switch layers in precedence order, lowest first (job.h): the built-in
// default switch file, each rule folder's, the job file's switch file and
// pass lists, the command line's switch file and pass lists.
Expected<std::vector<passes::SwitchLayer>> switchLayers(const std::optional<JobSettings> &job_file,
                                                        const JobSettings &command_line,
                                                        const std::vector<std::string> &rule_dirs) {
  std::vector<passes::SwitchLayer> layers;
  for (const EmbeddedFile &file : passes::embeddedFusionRuleFiles()) {
    if (fs::path(file.path).filename() != passes::rules::kDefaultSwitchFileName)
      continue;
    KILN_ASSIGN_OR_RETURN(json doc, parseJson(file.contents, file.path));
    KILN_ASSIGN_OR_RETURN(passes::SwitchLayer layer, passes::parseSwitchObject(doc, file.path));
    layers.push_back(std::move(layer));
  }
  for (const std::string &dir : rule_dirs) {
    fs::path file = fs::path(dir) / passes::rules::kDefaultSwitchFileName;
    if (!fs::exists(file))
      continue;
    KILN_ASSIGN_OR_RETURN(passes::SwitchLayer layer, passes::readSwitchFile(file.string()));
    layers.push_back(std::move(layer));
  }
  if (job_file) {
    if (job_file->fusion_switch)
      layers.push_back(*job_file->fusion_switch);
    layers.push_back(passListLayer(job_file->source, job_file->enable_passes,
                                   job_file->disable_passes, "$.enable_passes",
                                   "$.disable_passes"));
  }
  if (command_line.fusion_switch)
    layers.push_back(*command_line.fusion_switch);
  KILN_RETURN_IF_ERROR(
      checkNotBoth("command line", command_line.enable_passes, command_line.disable_passes));
  layers.push_back(passListLayer("command line", command_line.enable_passes,
                                 command_line.disable_passes, "--enable-pass", "--disable-pass"));
  return layers;
}

// The job file's folders, then the command line's.
std::vector<std::string> folders(const std::vector<std::string> &job,
                                 const std::vector<std::string> &command_line) {
  std::vector<std::string> all = job;
  all.insert(all.end(), command_line.begin(), command_line.end());
  return all;
}

// The custom ops of `dirs`, read again only when the spec's were other folders.
Expected<std::shared_ptr<const ops::OpRegistry>> customOpsOf(const JobSpec &spec,
                                                             const std::vector<std::string> &dirs) {
  if (spec.loaded_ops && spec.loaded_ops->dirs == dirs)
    return spec.loaded_ops->ops;
  return frontend::loadCustomOps(dirs);
}

// What a job file repeating the resolved job must say.
JobSettings effectiveSettings(const JobSettings &job, const JobSettings &command_line,
                              const std::string &target_name, const ResolvedJob &resolved,
                              passes::PrecisionMode mode,
                              const std::vector<std::string> &rule_dirs) {
  JobSettings effective;
  effective.target = target_name;
  effective.dtype = resolved.dtype;
  effective.overflow = resolved.overflow;
  effective.precision_mode = mode;
  effective.modify_mixlist =
      command_line.modify_mixlist ? command_line.modify_mixlist : job.modify_mixlist;
  effective.keep_dtype = command_line.keep_dtype ? command_line.keep_dtype : job.keep_dtype;
  effective.attention_fp32_layers = command_line.attention_fp32_layers
                                        ? command_line.attention_fp32_layers
                                        : job.attention_fp32_layers;
  const passes::RecomputeSettings recompute = passes::recomputeSettings(*resolved.context);
  effective.recompute = recompute.mode;
  if (!recompute.layers.empty())
    effective.recompute_layers = recompute.layers;
  effective.sequence_parallel =
      command_line.sequence_parallel ? command_line.sequence_parallel : job.sequence_parallel;
  effective.pass_options = job.pass_options;
  effective.pass_options.insert(effective.pass_options.end(), command_line.pass_options.begin(),
                                command_line.pass_options.end());
  effective.custom_op_dirs = resolved.spec.loaded_ops->dirs;
  effective.fusion_rule_dirs = rule_dirs;
  return effective;
}

} // namespace

JobSpec JobSpec::withPassesDisabled(const std::vector<std::string> &passes) const {
  JobSpec edited = *this;
  for (const std::string &p : passes) {
    std::erase(edited.flags.enable_passes, p);
    edited.flags.disable_passes.push_back(p);
  }
  return edited;
}

Expected<JobSpec> readJobSpec(const std::string &job_file, const std::string &switch_file,
                              JobSettings flags, DType default_dtype) {
  JobSpec spec;
  if (!job_file.empty()) {
    KILN_ASSIGN_OR_RETURN(spec.file, readJobFile(job_file));
  }
  spec.flags = std::move(flags);
  spec.flags.source = "command line";
  if (!switch_file.empty()) {
    KILN_ASSIGN_OR_RETURN(spec.flags.fusion_switch, passes::readSwitchFile(switch_file));
  }
  spec.default_dtype = default_dtype;
  return spec;
}

Expected<ResolvedJob> resolveJob(const std::optional<JobSettings> &job_file,
                                 const JobSettings &command_line, DType default_dtype) {
  return resolveJob(JobSpec{job_file, command_line, default_dtype});
}

Expected<ResolvedJob> resolveJob(const JobSpec &spec) {
  const std::optional<JobSettings> &job_file = spec.file;
  const JobSettings &command_line = spec.flags;
  const JobSettings empty;
  const JobSettings &job = job_file ? *job_file : empty;
  ResolvedJob resolved;
  resolved.spec = spec;

  std::string target_name = command_line.target.value_or(job.target.value_or("ascend910b"));
  Expected<target::Target> target = target::loadTarget(target_name);
  if (!target)
    // A target the job file named: say which file named it.
    return !command_line.target && job.target && !job.source.empty()
               ? target.error().withContext(job.source + ": $.target")
               : target.error();
  resolved.target = std::move(*target);
  // Custom ops first: precision lists and rules may name them.
  const std::vector<std::string> op_dirs = folders(job.custom_op_dirs, command_line.custom_op_dirs);
  KILN_ASSIGN_OR_RETURN(resolved.ops, customOpsOf(spec, op_dirs));
  resolved.spec.loaded_ops = JobSpec::LoadedOps{op_dirs, resolved.ops};
  const ops::OpRegistry &job_ops = resolved.ops ? *resolved.ops : ops::OpRegistry::builtin();
  passes::PrecisionMode mode;
  KILN_RETURN_IF_ERROR(resolveNumerics(job, command_line, spec.default_dtype, resolved, mode));
  KILN_ASSIGN_OR_RETURN(passes::PrecisionSettings precision,
                        resolvePrecision(job, command_line, mode, job_ops));

  // The registry: built-in passes, the built-in rules, then the rule folders'.
  const std::vector<std::string> rule_dirs =
      folders(job.fusion_rule_dirs, command_line.fusion_rule_dirs);
  KILN_ASSIGN_OR_RETURN(
      passes::PassRegistry with_rules,
      passes::rules::registryWithFusionRules(passes::PassRegistry::builtin(), rule_dirs, job_ops));
  auto registry = std::make_shared<passes::PassRegistry>(std::move(with_rules));
  KILN_ASSIGN_OR_RETURN(std::vector<passes::SwitchLayer> layers,
                        switchLayers(job_file, command_line, rule_dirs));
  const bool allow_unknown = job.allow_unknown_passes || command_line.allow_unknown_passes;
  KILN_ASSIGN_OR_RETURN(passes::SwitchResolution switches,
                        passes::resolveSwitches(*registry, layers, allow_unknown));
  for (const std::string &w : switches.warnings)
    spdlog::warn("{}", w);
  for (const std::string &n : switches.notes)
    spdlog::info("{}", n);
  resolved.warnings = switches.warnings;
  resolved.registry = registry;
  resolved.context = std::make_shared<passes::PassContext>(
      resolved.target, std::move(switches.enabled), std::move(switches.decided_by));
  resolved.context->setPrecision(std::move(precision));
  KILN_ASSIGN_OR_RETURN(
      auto options, passes::resolvePassOptions(*registry, passOptionSettings(job, command_line)));
  resolved.context->setOptions(std::move(options));
  resolved.effective = effectiveSettings(job, command_line, target_name, resolved, mode, rule_dirs);
  return resolved;
}

std::string numericsSummary(const ResolvedJob &job) {
  return std::string(dtypeName(job.dtype)) + " model, precision " +
         std::string(passes::precisionModeName(job.context->precision().mode)) + ", recompute " +
         passes::recomputeSettings(*job.context).toString();
}

ResolvedJob withRecompute(const ResolvedJob &job, passes::RecomputeMode mode) {
  ResolvedJob variant = job;
  variant.context = std::make_shared<passes::PassContext>(*job.context);
  if (const passes::Pass *pass = job.registry->find(passes::kRecomputePassName)) {
    const Status set =
        variant.context->setOption(*pass, "mode", passes::recomputeModeName(mode), "--recompute");
    assert(set && "RecomputePass takes every recompute mode");
    (void)set;
  }
  variant.spec.flags.recompute = mode;
  variant.effective.recompute = mode;
  return variant;
}

} // namespace kiln::driver
