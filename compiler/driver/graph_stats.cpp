#include "compiler/driver/graph_stats.h"

#include <map>

namespace kiln::driver {

nlohmann::json graphStats(const Graph &graph) {
  std::map<std::string, int64_t> ops;
  for (const Node &n : graph.nodes())
    ++ops[n.op];
  int64_t parameter_bytes = 0;
  for (const GraphInput &in : graph.inputs())
    if (isWeight(in.role))
      parameter_bytes += graph.type(in.value).numElements() *
                         static_cast<int64_t>(dtypeSize(graph.type(in.value).dtype));
  return nlohmann::json{{"name", graph.name()},
                        {"parameter_count", graph.parameterCount()},
                        {"parameter_bytes", parameter_bytes},
                        {"nodes", graph.numNodes()},
                        {"values", graph.numValues()},
                        {"inputs", graph.inputs().size()},
                        {"outputs", graph.outputs().size()},
                        {"ops", ops}};
}

} // namespace kiln::driver
