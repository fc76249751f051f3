// What `kiln inspect` shows of an artifact: the manifest, whether this
// process may run it, and per bucket the kernels, the fusion groups and the
// memory plan. As JSON (--format json) and as text rendered from that JSON.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "compiler/artifact/artifact.h"

namespace kiln::artifact {

// `file_bytes` is the artifact's size on disk; `largest` how many of each
// bucket's largest buffers to list. Checks compatibility the way loading
// does, key recomputation included.
nlohmann::json summarizeArtifact(const Artifact &artifact, uint64_t file_bytes,
                                 size_t largest = 10);

// The text of a summary; each bucket lists its first `shown` kernels and
// fusion groups, then how many more there are.
std::string summaryToText(const nlohmann::json &summary, size_t shown = SIZE_MAX);

} // namespace kiln::artifact
