#include "ir/graph_extract.h"

#include <map>
#include <unordered_map>

namespace kiln {

Expected<Graph> extractSubgraph(const Graph &graph, const std::vector<NodeId> &members,
                                const std::vector<ValueId> &inputs,
                                const std::vector<ValueId> &outputs, const std::string &name) {
  Graph sub(name);
  sub.setVocabulary(graph.vocabulary());
  std::unordered_map<ValueId, ValueId> mapped;
  for (ValueId v : inputs) {
    InputRole role = InputRole::Data;
    if (graph.value(v).producer == kNoNode)
      for (const GraphInput &in : graph.inputs())
        if (in.value == v)
          role = in.role;
    mapped[v] = sub.addInput(graph.valueName(v), graph.type(v), role);
  }
  std::map<GroupId, GroupId> groups;
  for (NodeId id : members) {
    const Node &node = graph.node(id);
    std::vector<ValueId> args;
    for (ValueId v : node.inputs) {
      auto it = mapped.find(v);
      if (it == mapped.end())
        return Error("node '" + node.name + "' reads '" + graph.valueName(v) +
                     "', which is neither an input of the piece nor made inside it");
      args.push_back(it->second);
    }
    std::vector<TensorType> types;
    for (ValueId v : node.outputs)
      types.push_back(graph.type(v));
    NodeId copy = sub.addNode(node.op, node.name, args, types, node.attrs, node.provenance);
    if (node.group != kNoGroup) {
      auto [it, fresh] = groups.emplace(node.group, kNoGroup);
      if (fresh)
        it->second = sub.addGroup(graph.group(node.group));
      sub.node(copy).group = it->second;
    }
    for (size_t k = 0; k < node.outputs.size(); ++k)
      mapped[node.outputs[k]] = sub.node(copy).outputs[k];
  }
  for (ValueId v : outputs) {
    auto it = mapped.find(v);
    if (it == mapped.end())
      return Error("output '" + graph.valueName(v) + "' is not made inside the piece");
    sub.addOutput(graph.valueName(v), it->second);
  }
  return sub;
}

} // namespace kiln
