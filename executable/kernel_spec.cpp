#include "executable/kernel_spec.h"

namespace kiln::executable {

bool isReshapeView(const Graph &graph, const KernelSpec &kernel) {
  if (kernel.members.size() != 1)
    return false;
  const Node &node = graph.node(kernel.members.front());
  return node.op == "Reshape" &&
         graph.type(node.inputs[0]).dtype == graph.type(node.outputs[0]).dtype;
}

bool aliasesItsInput(const Graph &graph, const KernelSpec &kernel) {
  if (isReshapeView(graph, kernel))
    return true;
  if (kernel.members.size() != 1)
    return false;
  const Node &node = graph.node(kernel.members.front());
  return node.op == "TensorParallelCopy" &&
         graph.type(node.inputs[0]) == graph.type(node.outputs[0]);
}

} // namespace kiln::executable
