// A resolved job as JSON (an artifact manifest's `job`, and part of the
// program cache's key): target, precision and recompute settings, every
// pass's state and the layer that decided it.
#pragma once

#include <nlohmann/json.hpp>

#include "compiler/artifact/manifest.h"
#include "compiler/driver/job.h"

namespace kiln::driver {

nlohmann::json jobToJson(const ResolvedJob &job);

// The manifest of `job` compiled by this process now.
artifact::Manifest makeManifest(const ResolvedJob &job, const codegen::ObjectOptions &codegen,
                                artifact::ModelInfo model);

} // namespace kiln::driver
