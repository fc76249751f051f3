// Reads the "pattern" object of a fusion rule file (schema: docs/fusion-rules.md)
// and checks it: known ops with the right number of inputs, unique ids, inputs
// that name a node or a wildcard, no cycle, a root that exists and that every
// node feeds. Every error is "<file>: <json path>: <what is wrong>".
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "ops/op_registry.h"
#include "passes/fusion/rules/pattern.h"
#include "support/error.h"
#include "support/json_reader.h"

namespace kiln::passes::rules {

Expected<Pattern> parsePattern(const JsonReader &reader, const nlohmann::json &pattern,
                               const std::string &path, const ops::OpRegistry &ops);

} // namespace kiln::passes::rules
