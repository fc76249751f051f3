// An artifact's manifest: what built it (kiln, its code-generation sources,
// LLVM, the host), for which target, with which job settings and from which
// model request. Loading checks the first group against this process; the
// rest says what the artifact is (kiln inspect) and what to recompile with.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "compiler/codegen/object_compiler.h"
#include "ir/dtype.h"
#include "support/error.h"
#include "target/target.h"

namespace kiln::artifact {

struct ModelInfo {
  std::string path; // the MODEL argument of kiln compile, as given
  std::string name; // the graph's name ("qwen", "qwen_train")
  bool training = false;
  int64_t batch = 1;
};

struct Manifest {
  std::string kiln_version;
  std::string kiln_source_hash; // of the sources that decide kernel code
  std::string llvm_version;
  codegen::HostDescription host;
  int64_t created = 0; // unix seconds; SOURCE_DATE_EPOCH when set
  target::Target target;
  codegen::ObjectOptions codegen; // the object options every kernel was compiled with
  DType dtype = DType::F16;       // the model's dtype
  OverflowMode overflow = OverflowMode::InfNan;
  // The whole job as resolved: target, precision settings, every pass's
  // state and the layer that decided it. Descriptive: nothing is re-run from it.
  nlohmann::json job = nlohmann::json::object();
  ModelInfo model;
};

// The manifest of a job compiled by this process now; `job` is the job as
// resolved (driver/job_json.h).
Manifest makeManifest(const target::Target &target, DType dtype, OverflowMode overflow,
                      nlohmann::json job, const codegen::ObjectOptions &codegen, ModelInfo model);

// The manifest's own fields; the artifact adds its bucket and object tables.
nlohmann::json manifestToJson(const Manifest &manifest);
// Errors name the field ("manifest: 'host.cpu' must be a string").
Expected<Manifest> manifestFromJson(const nlohmann::json &json);

} // namespace kiln::artifact
