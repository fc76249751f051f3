// Cutting a piece out of a graph as a graph of its own: a kernel to re-run
// on the interpreter, a failing region to minimise, a repro to write out.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln {

// The nodes `members` (in graph order) as a graph named `name`: each of
// `inputs` becomes a Data input named after the value (its role kept when it
// was a graph input), each of `outputs` a graph output named after the value.
// Fusion groups among the members are kept. Every value a member reads must
// be an input or a member's output.
Expected<Graph> extractSubgraph(const Graph &graph, const std::vector<NodeId> &members,
                                const std::vector<ValueId> &inputs,
                                const std::vector<ValueId> &outputs, const std::string &name);

} // namespace kiln
