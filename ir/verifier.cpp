#include "ir/verifier.h"

#include <unordered_set>

namespace kiln {
namespace {

// Every group is non-empty, uniquely named, and its members are contiguous
// (which compact() guarantees for a convex group).
Status verifyGroups(const Graph &graph, const std::string &where) {
  std::unordered_set<std::string> names;
  for (const FusionGroup &g : graph.groups())
    if (!names.insert(g.name).second)
      return Error(where + ": duplicate fusion group name '" + g.name + "'");
  std::vector<bool> closed(graph.groups().size(), false), seen(graph.groups().size(), false);
  GroupId current = kNoGroup;
  for (const Node &node : graph.nodes()) {
    if (node.group != current && current != kNoGroup)
      closed[current] = true;
    current = node.group;
    if (current == kNoGroup)
      continue;
    if (current < 0 || static_cast<size_t>(current) >= graph.groups().size())
      return Error(where + ": node '" + node.name + "' names fusion group #" +
                   std::to_string(current) + ", which does not exist");
    if (closed[current])
      return Error(where + ": the members of fusion group '" + graph.group(current).name +
                   "' are not contiguous (node '" + node.name + "')");
    seen[current] = true;
  }
  for (size_t g = 0; g < seen.size(); ++g)
    if (!seen[g])
      return Error(where + ": fusion group '" + graph.groups()[g].name + "' has no members");
  return Status::ok();
}

} // namespace

Status verifyStructure(const Graph &graph) {
  const std::string where = "graph '" + graph.name() + "'";
  std::vector<bool> defined(graph.numValues(), false);
  std::unordered_set<std::string> names;
  for (const GraphInput &in : graph.inputs()) {
    if (in.name.empty())
      return Error(where + ": a graph input has an empty name");
    if (!names.insert(in.name).second)
      return Error(where + ": duplicate name '" + in.name + "'");
    if (in.value < 0 || static_cast<size_t>(in.value) >= graph.numValues())
      return Error(where + ": input '" + in.name + "' refers to no value");
    if (graph.value(in.value).producer != kNoNode || defined[in.value])
      return Error(where + ": input '" + in.name + "' refers to a value it does not own");
    for (int64_t d : graph.type(in.value).shape)
      if (d < 0)
        return Error(where + ": input '" + in.name + "' has negative dimension in " +
                     typeToString(graph.type(in.value)));
    if (!checkedByteSize(graph.type(in.value)))
      return Error(where + ": input '" + in.name + "' of type " +
                   typeToString(graph.type(in.value)) + " needs more than 2^63 bytes");
    defined[in.value] = true;
  }
  for (size_t i = 0; i < graph.numNodes(); ++i) {
    const Node &node = graph.node(static_cast<NodeId>(i));
    if (node.name.empty())
      return Error(where + ": node #" + std::to_string(i) + " (" + node.op + ") has no name");
    if (node.op.empty())
      return Error(where + ": node '" + node.name + "' has no op");
    if (!names.insert(node.name).second)
      return Error(where + ": duplicate name '" + node.name + "'");
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      ValueId in = node.inputs[k];
      if (in < 0 || static_cast<size_t>(in) >= graph.numValues())
        return Error(where + ": node '" + node.name + "' input " + std::to_string(k) +
                     " refers to no value");
      if (!defined[in])
        return Error(where + ": node '" + node.name + "' uses '" + graph.valueName(in) +
                     "' before it is defined (nodes must be in topological order)");
    }
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      ValueId out = node.outputs[k];
      if (out < 0 || static_cast<size_t>(out) >= graph.numValues())
        return Error(where + ": node '" + node.name + "' output " + std::to_string(k) +
                     " refers to no value");
      const Value &v = graph.value(out);
      if (v.producer != static_cast<NodeId>(i) || v.index != static_cast<int32_t>(k))
        return Error(where + ": node '" + node.name + "' output " + std::to_string(k) +
                     " is not recorded as produced by it");
      for (int64_t d : v.type.shape)
        if (d < 0)
          return Error(where + ": node '" + node.name + "' output has negative dimension in " +
                       typeToString(v.type));
      if (!checkedByteSize(v.type))
        return Error(where + ": node '" + node.name + "' output " + typeToString(v.type) +
                     " needs more than 2^63 bytes");
      // "<node>#<k>" names must stay unique too, or text and JSON become ambiguous.
      if (node.outputs.size() > 1 && !names.insert(graph.valueName(out)).second)
        return Error(where + ": value name '" + graph.valueName(out) + "' of node '" + node.name +
                     "' is already taken");
      defined[out] = true;
    }
  }
  KILN_RETURN_IF_ERROR(verifyGroups(graph, where));
  std::unordered_set<std::string> output_names;
  for (const GraphOutput &out : graph.outputs()) {
    if (!output_names.insert(out.name).second)
      return Error(where + ": duplicate output name '" + out.name + "'");
    if (out.value < 0 || static_cast<size_t>(out.value) >= graph.numValues() || !defined[out.value])
      return Error(where + ": output '" + out.name + "' refers to no defined value");
  }
  return Status::ok();
}

} // namespace kiln
