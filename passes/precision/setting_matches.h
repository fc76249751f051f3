// Checks the job's list-like precision settings against the model's graph
// (before any pass runs) and records what each entry matched: a keep_dtype
// node name no node has, or an attention_fp32_layers layer the model lacks,
// is a typo and an error naming the file or flag, with the nearest names.
// Op type entries that match no node of this graph are reported with 0, not
// refused: the same mixlist serves the forward and the training graph.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "passes/precision/precision_settings.h"
#include "passes/setting_match.h"
#include "support/error.h"

namespace kiln::passes {

// The i of a node named "...transformer.h.<i>...." or "...model.layers.<i>....",
// or -1 (ir/layer_scope.h).
int64_t modelLayerOf(std::string_view node_name);

class PassContext;

// The job's settings: its precision and AttentionFp32CastPass's "layers".
Expected<std::vector<SettingMatch>> matchPrecisionSettings(const Graph &graph,
                                                           const PassContext &ctx);
// The same for `settings`, and `attention_layers` as written at
// `attention_source` ("--attention-fp32-layers").
Expected<std::vector<SettingMatch>>
matchPrecisionSettings(const Graph &graph, const PrecisionSettings &settings,
                       const std::set<int64_t> &attention_layers = {},
                       const std::string &attention_source = "");

} // namespace kiln::passes
