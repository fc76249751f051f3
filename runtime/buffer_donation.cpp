#include "runtime/buffer_donation.h"

#include <map>
#include <string_view>

#include "executable/kernel_spec.h"
#include "ops/op_registry.h"

namespace kiln::runtime {
namespace {

// A kernel that reads each element of a tensor of `shape` only to write the
// same element of its outputs: nothing it stores can be read after.
bool elementwiseOver(const Graph &graph, const executable::CompiledKernel &kernel,
                     const Shape &shape) {
  if (kernel.host || kernel.collective || kernel.gemm || kernel.spec.members.empty())
    return false;
  const ops::OpRegistry &ops = ops::opsOf(graph);
  for (NodeId id : kernel.spec.members) {
    const Node &node = graph.node(id);
    const ops::RegisteredOp *op = ops.find(node.op);
    if (!op)
      return false;
    // AdamW is opaque to fusion but elementwise in its same-shaped
    // operands (param, gradient, moments) beside its scalars.
    const bool elementwise = op->def.kind == ops::OpKind::Elementwise ||
                             op->def.kind == ops::OpKind::Broadcast || node.op == "AdamW";
    if (!elementwise)
      return false;
    for (ValueId out : node.outputs)
      if (graph.type(out).shape != shape)
        return false;
  }
  return true;
}

} // namespace

std::vector<ValueId> donatableInputs(const Graph &graph, const executable::Executable &kernels,
                                     const std::vector<int64_t> &offsets,
                                     const std::vector<ValueId> &last_use_kernel) {
  std::vector<ValueId> over(graph.numValues(), kNoValue);
  std::map<std::string_view, ValueId> inputs;
  for (const GraphInput &in : graph.inputs())
    inputs[in.name] = in.value;
  std::vector<ValueId> made_by(graph.numValues(), kNoValue); // value -> kernel
  for (size_t k = 0; k < kernels.kernels.size(); ++k)
    for (ValueId v : kernels.kernels[k].spec.outputs)
      made_by[v] = static_cast<ValueId>(k);
  std::vector<char> taken(graph.numValues(), 0); // an input overwritten by one output only
  for (const GraphOutput &out : graph.outputs()) {
    auto in = inputs.find(out.name);
    const ValueId k = made_by[out.value];
    if (in == inputs.end() || k == kNoValue || taken[in->second])
      continue;
    const ValueId input = in->second;
    if (offsets[input] >= 0 || !(graph.type(input) == graph.type(out.value)))
      continue;
    // An input no kernel reads (a weight's old compute copy) is free bytes
    // from the start; one that is read, only once its last reader has read
    // the element it writes.
    if (last_use_kernel[input] >= 0 &&
        (last_use_kernel[input] != k ||
         !elementwiseOver(graph, kernels.kernels[static_cast<size_t>(k)], graph.type(input).shape)))
      continue;
    over[out.value] = input;
    taken[input] = 1;
  }
  return over;
}

} // namespace kiln::runtime
