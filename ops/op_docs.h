// Reference documentation of the op vocabulary, generated from the op
// definitions (docs/ops.md is this output).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "ops/op_registry.h"

namespace kiln::ops {

std::string opsToMarkdown(const OpRegistry &registry);
nlohmann::json opsToJson(const OpRegistry &registry);

} // namespace kiln::ops
