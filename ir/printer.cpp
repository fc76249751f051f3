#include "ir/printer.h"

#include <sstream>

#include "support/printable_text.h"

namespace kiln {
namespace {

// Names come from files and may hold any byte; escaped, every entry stays
// on its line and nothing reaches a terminal as a control character.
std::string name(std::string_view text) { return printableName(text); }

} // namespace

std::string nodeToText(const Graph &graph, const Node &node, const PrintOptions &options) {
  std::string s;
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (i)
      s += ", ";
    s += "%" + name(graph.valueName(node.outputs[i])) + ": " +
         typeToString(graph.type(node.outputs[i]));
  }
  s += node.outputs.empty() ? "" : " = ";
  s += name(node.op) + "(";
  for (size_t i = 0; i < node.inputs.size(); ++i)
    s += (i ? ", %" : "%") + name(graph.valueName(node.inputs[i]));
  s += ")";
  if (!node.attrs.empty()) {
    s += " {";
    bool first = true;
    for (const auto &[key, value] : node.attrs) {
      s += (first ? "" : ", ") + name(key) + "=" + attrValueToString(value);
      first = false;
    }
    s += "}";
  }
  if (node.group != kNoGroup)
    s += " in " + name(graph.group(node.group).name);
  if (options.provenance && !node.provenance.pass.empty()) {
    s += "  // " + name(node.provenance.pass);
    for (size_t i = 0; i < node.provenance.origins.size(); ++i)
      s += (i ? ", " : " <- ") + name(node.provenance.origins[i]);
  }
  return s;
}

void printGraph(const Graph &graph, std::ostream &os, const PrintOptions &options) {
  os << "graph " << name(graph.name()) << " {\n";
  for (const GraphInput &in : graph.inputs())
    os << "  input %" << name(in.name) << ": " << typeToString(graph.type(in.value)) << " "
       << inputRoleName(in.role) << "\n";
  for (const FusionGroup &g : graph.groups())
    os << "  group " << name(g.name) << " kernel=" << name(g.kernel)
       << " formed_by=" << name(g.formed_by)
       << " intermediates=" << intermediatesName(g.intermediates) << "\n";
  for (const Node &node : graph.nodes())
    os << "  " << nodeToText(graph, node, options) << "\n";
  for (const GraphOutput &out : graph.outputs())
    os << "  output " << name(out.name) << " = %" << name(graph.valueName(out.value)) << ": "
       << typeToString(graph.type(out.value)) << "\n";
  os << "}\n";
}

std::string graphToText(const Graph &graph, const PrintOptions &options) {
  std::ostringstream os;
  printGraph(graph, os, options);
  return os.str();
}

} // namespace kiln
