// JSON (de)serialisation of graphs; round-trips exactly.
//
// {"format": "kiln.graph", "version": 1, "name": "...",
//  "inputs":  [{"name", "dtype", "shape", "role"}],
//  "nodes":   [{"op", "name", "inputs": ["<value name>"...],
//               "outputs": [{"dtype", "shape"}], "attrs": {"k": {"<kind>": v}},
//               "provenance": {"pass", "origins"}}],
//  "outputs": [{"name", "value": "<value name>"}]}
// Values are referred to by the names the text printer uses.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "ir/graph.h"
#include "support/error.h"

namespace kiln {

inline constexpr int kGraphJsonVersion = 1;

nlohmann::json graphToJson(const Graph &graph);
// `source` names the file in error messages. The result passes verifyStructure.
Expected<Graph> graphFromJson(const nlohmann::json &json, std::string_view source);
Expected<Graph> parseGraphJson(std::string_view text, std::string_view source);

} // namespace kiln
