#include "compiler/parallel/weight_copies.h"

#include <optional>
#include <vector>

#include "compiler/autodiff/training_step.h"

namespace kiln::parallel {

std::map<std::string, DType> readWeightCopies(Graph &step, const std::set<std::string> &weights) {
  const std::vector<std::vector<NodeId>> users = step.computeUsers();
  std::map<std::string, DType> copies;
  // Inputs are appended while the list is walked: by index, over those there were.
  const size_t inputs = step.inputs().size();
  for (size_t i = 0; i < inputs; ++i) {
    const GraphInput in = step.inputs()[i];
    const TensorType &type = step.type(in.value);
    if (!weights.count(in.name) || !isFloat(type.dtype))
      continue;
    // The narrowing Casts of the weight, all to one dtype.
    std::vector<NodeId> casts;
    std::optional<DType> to;
    bool one_dtype = true;
    for (NodeId u : users[in.value]) {
      const Node &node = step.node(u);
      if (node.op != "Cast")
        continue;
      const DType d = step.type(node.outputs[0]).dtype;
      if (!isFloat(d) || dtypeSize(d) >= dtypeSize(type.dtype))
        continue;
      one_dtype = one_dtype && (!to || *to == d);
      to = d;
      casts.push_back(u);
    }
    if (casts.empty() || !one_dtype)
      continue;
    const ValueId copy =
        step.addInput(autodiff::weightCopyName(in.name), {*to, type.shape}, InputRole::WeightCopy);
    for (NodeId cast : casts) {
      step.replaceAllUses(step.node(cast).outputs[0], copy);
      step.eraseNode(cast);
    }
    copies[in.name] = *to;
  }
  return copies;
}

} // namespace kiln::parallel
