#include "compiler/codegen/kernel_cost.h"

#include <algorithm>

namespace kiln::codegen {

namespace {

double elements(const Graph &graph, ValueId v) {
  return static_cast<double>(numElements(graph.type(v).shape));
}

double bytes(const Graph &graph, ValueId v) {
  return elements(graph, v) * static_cast<double>(dtypeSize(graph.type(v).dtype));
}

bool isMatMul(const Node &node) { return node.op == "MatMul" || node.op == "BatchMatMul"; }

} // namespace

double nodeFlops(const Graph &graph, const Node &node) {
  if (node.outputs.empty())
    return 0;
  const double out = elements(graph, node.outputs[0]);
  if (isMatMul(node) && !node.inputs.empty()) {
    // Each output element is a dot product over the contracted extent of A.
    const Shape &a = graph.type(node.inputs[0]).shape;
    if (a.size() < 2)
      return out;
    const bool ta = node.attrs.has("transpose_a") && node.attrs.getBool("transpose_a");
    const int64_t k = ta ? a[a.size() - 2] : a.back();
    return 2.0 * out * static_cast<double>(k);
  }
  double in = 0;
  for (ValueId v : node.inputs)
    in = std::max(in, elements(graph, v));
  return std::max(out, in);
}

KernelCost kernelCost(const Graph &graph, const KernelSpec &kernel) {
  KernelCost cost;
  for (NodeId id : kernel.members) {
    const Node &node = graph.node(id);
    const double f = nodeFlops(graph, node);
    cost.flops += f;
    if (isMatMul(node))
      cost.matmul_flops += f;
  }
  for (ValueId v : kernel.inputs)
    cost.input_bytes += bytes(graph, v);
  for (ValueId v : kernel.outputs)
    cost.output_bytes += bytes(graph, v);
  return cost;
}

} // namespace kiln::codegen
