#include "compiler/codegen/kernel_spec.h"

#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "ops/op_registry.h"

namespace kiln::codegen {
namespace {

std::vector<bool> graphOutputs(const Graph &graph) {
  std::vector<bool> graph_output(graph.numValues(), false);
  for (const GraphOutput &out : graph.outputs())
    graph_output[out.value] = true;
  return graph_output;
}

KernelSpec makeKernel(const Graph &graph, const std::vector<std::vector<NodeId>> &users,
                      const std::vector<bool> &graph_output, std::vector<NodeId> members,
                      bool as_group) {
  KernelSpec k;
  const Node &first = graph.node(members.front());
  if (as_group && first.group != kNoGroup) {
    const FusionGroup &g = graph.group(first.group);
    k.name = g.name;
    k.kind = g.kernel;
    k.formed_by = g.formed_by;
    k.grouped = true;
    k.intermediates = g.intermediates;
  } else {
    k.name = first.name;
    k.kind = first.op;
  }
  std::unordered_set<NodeId> inside(members.begin(), members.end());
  std::unordered_set<ValueId> produced, seen_inputs;
  for (NodeId n : members) {
    for (ValueId v : graph.node(n).inputs)
      if (!produced.count(v) && seen_inputs.insert(v).second)
        k.inputs.push_back(v);
    for (ValueId v : graph.node(n).outputs) {
      produced.insert(v);
      bool leaves = graph_output[v];
      for (NodeId u : users[v])
        leaves = leaves || !inside.count(u);
      if (leaves)
        k.outputs.push_back(v);
    }
  }
  k.members = std::move(members);
  return k;
}

} // namespace

std::vector<KernelSpec> partitionKernels(const Graph &graph) {
  const std::vector<std::vector<NodeId>> users = graph.computeUsers();
  const std::vector<bool> graph_output = graphOutputs(graph);
  std::vector<KernelSpec> kernels;
  const NodeId n = static_cast<NodeId>(graph.numNodes());
  for (NodeId i = 0; i < n;) {
    std::vector<NodeId> members{i};
    const GroupId g = graph.node(i).group;
    ++i;
    while (g != kNoGroup && i < n && graph.node(i).group == g)
      members.push_back(i++);
    KernelSpec k = makeKernel(graph, users, graph_output, std::move(members), true);
    if (!k.outputs.empty()) // nothing reads what it makes: dead code, no kernel
      kernels.push_back(std::move(k));
  }
  return kernels;
}

KernelSpec singleNodeKernel(const Graph &graph, NodeId node) {
  return makeKernel(graph, graph.computeUsers(), graphOutputs(graph), {node}, false);
}

std::string canonicalKernelText(const Graph &graph, const KernelSpec &kernel) {
  std::ostringstream os;
  os << "kernel " << kernel.kind << " intermediates="
     << intermediatesName(kernel.grouped ? kernel.intermediates : Intermediates::Storage) << "\n";
  std::unordered_map<ValueId, std::string> local;
  for (size_t i = 0; i < kernel.inputs.size(); ++i) {
    local[kernel.inputs[i]] = "%in" + std::to_string(i);
    os << "  %in" << i << " : " << typeToString(graph.type(kernel.inputs[i])) << "\n";
  }
  int next = 0;
  for (NodeId id : kernel.members) {
    const Node &node = graph.node(id);
    os << "  ";
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const std::string name = "%" + std::to_string(next++);
      local[node.outputs[k]] = name;
      os << (k ? ", " : "") << name << " : " << typeToString(graph.type(node.outputs[k]));
    }
    os << " = " << node.op << "(";
    for (size_t k = 0; k < node.inputs.size(); ++k)
      os << (k ? ", " : "") << local.at(node.inputs[k]);
    os << ")";
    // A custom op's code is its compute: a changed definition is another kernel.
    if (const ops::RegisteredOp *reg = ops::opsOf(graph).find(node.op);
        reg && !reg->def.compute.empty())
      os << " compute=\"" << reg->def.compute << "\"";
    if (!node.attrs.empty()) {
      os << " {";
      bool first = true;
      for (const auto &[name, value] : node.attrs) { // AttrMap iterates sorted
        os << (first ? "" : ", ") << name << "=" << attrValueToString(value);
        first = false;
      }
      os << "}";
    }
    os << "\n";
  }
  os << "  return";
  for (size_t k = 0; k < kernel.outputs.size(); ++k)
    os << (k ? ", " : " ") << local.at(kernel.outputs[k]);
  os << "\n";
  return os.str();
}

} // namespace kiln::codegen
