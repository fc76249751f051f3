// The manifest's JSON and what a compile job puts in it.
#include "compiler/artifact/manifest.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>

#include <spdlog/spdlog.h>

#include "compiler/artifact/json_fields.h"
#include "compiler/codegen/kernel_compiler.h"

namespace kiln::artifact {

using nlohmann::json;

namespace {

// Now, or SOURCE_DATE_EPOCH when set (reproducible-builds.org): the one
// field that would otherwise make two compiles of one job differ in bytes.
int64_t creationTime() {
  if (const char *epoch = std::getenv("SOURCE_DATE_EPOCH")) {
    char *end = nullptr;
    errno = 0;
    const long long v = std::strtoll(epoch, &end, 10);
    if (errno == 0 && end != epoch && *end == '\0' && v >= 0)
      return v;
    spdlog::warn("SOURCE_DATE_EPOCH='{}' is not a number of seconds; using the current time",
                 epoch);
  }
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

} // namespace

Manifest makeManifest(const target::Target &target, DType dtype, OverflowMode overflow,
                      nlohmann::json job, const codegen::ObjectOptions &codegen, ModelInfo model) {
  // The same parts the kernel keys hash, so the manifest and the keys agree.
  const cache::CacheKeyInputs base = codegen::baseKeyInputs(target, codegen);
  Manifest m;
  m.kiln_version = base.kiln_version;
  m.kiln_source_hash = base.kiln_source_hash;
  m.llvm_version = base.llvm_version;
  m.host = codegen::hostDescription();
  m.created = creationTime();
  m.target = target;
  m.codegen = codegen;
  m.dtype = dtype;
  m.overflow = overflow;
  m.job = std::move(job);
  m.model = std::move(model);
  return m;
}

json manifestToJson(const Manifest &m) {
  return {{"kiln_version", m.kiln_version},
          {"kiln_source_hash", m.kiln_source_hash},
          {"llvm_version", m.llvm_version},
          {"host", {{"triple", m.host.triple}, {"cpu", m.host.cpu}, {"features", m.host.features}}},
          {"created", m.created},
          {"target", target::targetToJson(m.target)},
          {"codegen",
           {{"overflow", std::string(overflowModeName(m.codegen.overflow))},
            {"opt_level", m.codegen.opt_level}}},
          {"dtype", std::string(dtypeName(m.dtype))},
          {"overflow_mode", std::string(overflowModeName(m.overflow))},
          {"job", m.job},
          {"model",
           {{"path", m.model.path},
            {"name", m.model.name},
            {"training", m.model.training},
            {"batch", m.model.batch}}}};
}

Expected<Manifest> manifestFromJson(const json &j) {
  const JsonFields f(j, "manifest");
  if (!f.isObject())
    return Error("manifest: expected a JSON object");
  Manifest m;
  KILN_ASSIGN_OR_RETURN(m.kiln_version, f.string("kiln_version"));
  KILN_ASSIGN_OR_RETURN(m.kiln_source_hash, f.string("kiln_source_hash"));
  KILN_ASSIGN_OR_RETURN(m.llvm_version, f.string("llvm_version"));
  KILN_ASSIGN_OR_RETURN(m.created, f.integer("created"));

  KILN_ASSIGN_OR_RETURN(const json *host, f.object("host"));
  const JsonFields h(*host, "manifest: host");
  KILN_ASSIGN_OR_RETURN(m.host.triple, h.string("triple"));
  KILN_ASSIGN_OR_RETURN(m.host.cpu, h.string("cpu"));
  KILN_ASSIGN_OR_RETURN(m.host.features, h.string("features"));

  KILN_ASSIGN_OR_RETURN(const json *target, f.object("target"));
  auto parsed_target = target::parseTarget(*target, "manifest: target");
  if (!parsed_target)
    return parsed_target.error();
  m.target = std::move(*parsed_target);

  KILN_ASSIGN_OR_RETURN(const json *codegen, f.object("codegen"));
  const JsonFields c(*codegen, "manifest: codegen");
  KILN_ASSIGN_OR_RETURN(std::string codegen_overflow, c.string("overflow"));
  auto overflow = parseOverflowMode(codegen_overflow);
  if (!overflow)
    return c.error("overflow", "must be infnan or saturation");
  m.codegen.overflow = *overflow;
  KILN_ASSIGN_OR_RETURN(int64_t opt_level, c.integer("opt_level"));
  m.codegen.opt_level = static_cast<int>(opt_level);

  KILN_ASSIGN_OR_RETURN(std::string dtype, f.string("dtype"));
  auto parsed_dtype = parseDType(dtype);
  if (!parsed_dtype)
    return f.error("dtype", "must be a dtype (f32, f16, bf16)");
  m.dtype = *parsed_dtype;
  KILN_ASSIGN_OR_RETURN(std::string overflow_mode, f.string("overflow_mode"));
  overflow = parseOverflowMode(overflow_mode);
  if (!overflow)
    return f.error("overflow_mode", "must be infnan or saturation");
  m.overflow = *overflow;

  KILN_ASSIGN_OR_RETURN(const json *job, f.object("job"));
  m.job = *job;

  KILN_ASSIGN_OR_RETURN(const json *model, f.object("model"));
  const JsonFields mo(*model, "manifest: model");
  KILN_ASSIGN_OR_RETURN(m.model.path, mo.string("path"));
  KILN_ASSIGN_OR_RETURN(m.model.name, mo.string("name"));
  KILN_ASSIGN_OR_RETURN(m.model.training, mo.boolean("training"));
  KILN_ASSIGN_OR_RETURN(m.model.batch, mo.integer("batch"));
  return m;
}

} // namespace kiln::artifact
