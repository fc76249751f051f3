#include "ir/printer.h"

#include <sstream>

namespace kiln {

std::string nodeToText(const Graph &graph, const Node &node, const PrintOptions &options) {
  std::string s;
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (i)
      s += ", ";
    s += "%" + graph.valueName(node.outputs[i]) + ": " + typeToString(graph.type(node.outputs[i]));
  }
  s += node.outputs.empty() ? "" : " = ";
  s += node.op + "(";
  for (size_t i = 0; i < node.inputs.size(); ++i)
    s += (i ? ", %" : "%") + graph.valueName(node.inputs[i]);
  s += ")";
  if (!node.attrs.empty()) {
    s += " {";
    bool first = true;
    for (const auto &[key, value] : node.attrs) {
      s += (first ? "" : ", ") + key + "=" + attrValueToString(value);
      first = false;
    }
    s += "}";
  }
  if (node.group != kNoGroup)
    s += " in " + graph.group(node.group).name;
  if (options.provenance && !node.provenance.pass.empty()) {
    s += "  // " + node.provenance.pass;
    for (size_t i = 0; i < node.provenance.origins.size(); ++i)
      s += (i ? ", " : " <- ") + node.provenance.origins[i];
  }
  return s;
}

void printGraph(const Graph &graph, std::ostream &os, const PrintOptions &options) {
  os << "graph " << graph.name() << " {\n";
  for (const GraphInput &in : graph.inputs())
    os << "  input %" << in.name << ": " << typeToString(graph.type(in.value)) << " "
       << inputRoleName(in.role) << "\n";
  for (const FusionGroup &g : graph.groups())
    os << "  group " << g.name << " kernel=" << g.kernel << " formed_by=" << g.formed_by
       << " intermediates=" << intermediatesName(g.intermediates) << "\n";
  for (const Node &node : graph.nodes())
    os << "  " << nodeToText(graph, node, options) << "\n";
  for (const GraphOutput &out : graph.outputs())
    os << "  output " << out.name << " = %" << graph.valueName(out.value) << ": "
       << typeToString(graph.type(out.value)) << "\n";
  os << "}\n";
}

std::string graphToText(const Graph &graph, const PrintOptions &options) {
  std::ostringstream os;
  printGraph(graph, os, options);
  return os.str();
}

} // namespace kiln
