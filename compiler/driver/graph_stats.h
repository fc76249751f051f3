// A JSON summary of a graph: sizes, parameter count and op histogram.
#pragma once

#include <nlohmann/json.hpp>

#include "ir/graph.h"

namespace kiln::driver {

// {"name", "parameter_count", "parameter_bytes", "nodes", "values", "inputs",
//  "outputs", "ops": {op: count}}.
nlohmann::json graphStats(const Graph &graph);

} // namespace kiln::driver
