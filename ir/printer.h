// A readable, stable text form of a graph: one line per input, node and output.
//
//   graph main {
//     input %input_ids: i64[1,16] data
//     %transformer.wte: f32[1,16,64] = Gather(%transformer.wte.weight, %input_ids)
//     output loss = %loss
//   }
#pragma once

#include <ostream>
#include <string>

#include "ir/graph.h"

namespace kiln {

struct PrintOptions {
  bool provenance = false; // append "// pass <- origins" to nodes with provenance
};

void printGraph(const Graph &graph, std::ostream &os, const PrintOptions &options = {});
std::string graphToText(const Graph &graph, const PrintOptions &options = {});
// One node's line, without indentation or newline.
std::string nodeToText(const Graph &graph, const Node &node, const PrintOptions &options = {});

} // namespace kiln
