#include "compiler/autodiff/autodiff.h"

namespace kiln::autodiff {
namespace {

// Marks the nodes on some path from a wrt value to the target.
std::vector<bool> nodesOnPath(const Graph &graph, ValueId target, const std::vector<ValueId> &wrt,
                              size_t num_forward_nodes) {
  std::vector<bool> from_wrt(graph.numValues(), false);
  for (ValueId v : wrt)
    from_wrt[v] = true;
  std::vector<bool> reaches_wrt_node(num_forward_nodes, false);
  for (size_t i = 0; i < num_forward_nodes; ++i) {
    const Node &n = graph.node(static_cast<NodeId>(i));
    bool any = false;
    for (ValueId in : n.inputs)
      any = any || from_wrt[in];
    if (!any)
      continue;
    reaches_wrt_node[i] = true;
    for (ValueId out : n.outputs)
      from_wrt[out] = true;
  }
  std::vector<bool> to_target(graph.numValues(), false);
  to_target[target] = true;
  std::vector<bool> on_path(num_forward_nodes, false);
  for (size_t i = num_forward_nodes; i-- > 0;) {
    const Node &n = graph.node(static_cast<NodeId>(i));
    bool feeds = false;
    for (ValueId out : n.outputs)
      feeds = feeds || to_target[out];
    if (!feeds || !reaches_wrt_node[i])
      continue;
    on_path[i] = true;
    for (ValueId in : n.inputs)
      to_target[in] = true;
  }
  return on_path;
}

} // namespace

Expected<std::vector<ValueId>> gradients(ops::OpBuilder &b, ValueId target,
                                         const std::vector<ValueId> &wrt) {
  Graph &graph = b.graph();
  if (graph.type(target).numElements() != 1 || !isFloat(graph.type(target).dtype))
    return Error("autodiff: target '" + graph.valueName(target) + "' must be a float scalar, got " +
                 typeToString(graph.type(target)));
  const size_t num_forward = graph.numNodes();
  const std::vector<bool> on_path = nodesOnPath(graph, target, wrt, num_forward);

  // Pending contributions to each value's gradient; summed when first needed.
  std::vector<std::vector<ValueId>> contributions(graph.numValues());
  auto gradOf = [&](ValueId v, const std::string &name) -> ValueId {
    std::vector<ValueId> &parts = contributions[v];
    if (parts.empty())
      return kNoValue;
    if (parts.size() > 1)
      parts = {b.create("AddN", name, parts)};
    return parts[0];
  };

  {
    auto scope = b.scope("grad");
    b.setProvenance({"autodiff", {graph.valueName(target)}});
    contributions[target].push_back(
        b.constant(1.0, graph.type(target).dtype, "seed", graph.type(target).shape));
  }
  for (size_t i = num_forward; i-- > 0;) {
    if (!on_path[i])
      continue;
    const Node node = graph.node(static_cast<NodeId>(i)); // copy: the graph grows below
    const ops::RegisteredOp *reg = ops::opsOf(graph).find(node.op);
    if (!reg)
      return Error("autodiff: unknown op '" + node.op + "' at node '" + node.name + "'");
    auto scope = b.scope("grad." + node.name);
    b.setProvenance({"autodiff", {node.name}});
    std::vector<ValueId> output_grads;
    bool any = false;
    for (ValueId out : node.outputs) {
      output_grads.push_back(gradOf(out, "sum"));
      any = any || output_grads.back() != kNoValue;
    }
    if (!any)
      continue;
    if (!reg->impl.grad)
      return Error("autodiff: op " + node.op + " (node '" + node.name +
                   "') is not differentiable but lies between the parameters and '" +
                   graph.valueName(target) + "'");
    ops::GradContext ctx{b, node, output_grads};
    auto input_grads = reg->impl.grad(ctx);
    if (!input_grads)
      return input_grads.error().withContext("autodiff of node '" + node.name + "'");
    KILN_RETURN_IF_ERROR(b.status());
    for (size_t k = 0; k < node.inputs.size() && k < input_grads->size(); ++k) {
      ValueId g = (*input_grads)[k];
      if (g == kNoValue)
        continue;
      if (!(graph.type(g) == graph.type(node.inputs[k])))
        return Error("autodiff: gradient rule of " + node.op + " gives " +
                     typeToString(graph.type(g)) + " for input " + std::to_string(k) +
                     " of node '" + node.name + "' of type " +
                     typeToString(graph.type(node.inputs[k])));
      contributions[node.inputs[k]].push_back(g);
    }
  }

  std::vector<ValueId> result;
  for (ValueId v : wrt) {
    auto scope = b.scope("grad." + graph.valueName(v));
    b.setProvenance({"autodiff", {graph.valueName(v)}});
    ValueId g = gradOf(v, "sum");
    if (g == kNoValue)
      g = b.constant(0.0, graph.type(v).dtype, "zero", graph.type(v).shape);
    result.push_back(g);
  }
  b.setProvenance({});
  KILN_RETURN_IF_ERROR(b.status());
  return result;
}

} // namespace kiln::autodiff
