// Reads the "constraints" of a pattern node and of a wildcard:
//   {"dtype": ["f16", "bf16"], "rank": 3, "shape": [-1, -1, 128],
//    "attrs": {"dtype": "f32"}, "same_shape_as": "$x"}
// "attrs" (nodes only) are typed by the op definitions of the node's ops.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "ops/op_registry.h"
#include "passes/fusion/rules/pattern.h"
#include "support/error.h"
#include "support/json_reader.h"

namespace kiln::passes::rules {

// A node id or "$wildcard" to what it refers to, or nullopt.
using RefResolver = std::function<std::optional<PatternRef>(const std::string &)>;

Expected<Constraints> parseNodeConstraints(const JsonReader &reader, const nlohmann::json &c,
                                           const std::string &path, const PatternNode &node,
                                           const ops::OpRegistry &ops, const RefResolver &resolve);
Expected<Constraints> parseWildcardConstraints(const JsonReader &reader, const nlohmann::json &c,
                                               const std::string &path, const RefResolver &resolve);

} // namespace kiln::passes::rules
