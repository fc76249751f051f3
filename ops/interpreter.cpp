#include "ops/interpreter.h"

#include "ir/verifier.h"

namespace kiln::ops {

Expected<TensorMap> interpret(const Graph &graph, const TensorMap &inputs,
                              const InterpretOptions &options, const OpRegistry &registry) {
  std::vector<Tensor> values(graph.numValues());
  for (const GraphInput &in : graph.inputs()) {
    auto it = inputs.find(in.name);
    if (it == inputs.end())
      return Error("graph '" + graph.name() + "': no data for input '" + in.name + "' (" +
                   typeToString(graph.type(in.value)) + ")");
    if (!(it->second.type() == graph.type(in.value)))
      return Error("graph '" + graph.name() + "': input '" + in.name + "' must be " +
                   typeToString(graph.type(in.value)) + ", got " + typeToString(it->second.type()));
    values[in.value] = it->second;
  }

  // Last node that reads each value; graph outputs are kept to the end.
  std::vector<NodeId> last_use(graph.numValues(), kNoNode);
  for (size_t i = 0; i < graph.numNodes(); ++i)
    for (ValueId v : graph.node(static_cast<NodeId>(i)).inputs)
      last_use[v] = static_cast<NodeId>(i);
  for (const GraphOutput &out : graph.outputs())
    last_use[out.value] = static_cast<NodeId>(graph.numNodes());

  KernelContext ctx;
  ctx.overflow = options.overflow;
  for (size_t i = 0; i < graph.numNodes(); ++i) {
    const Node &node = graph.node(static_cast<NodeId>(i));
    const RegisteredOp *reg = registry.find(node.op);
    if (!reg)
      return Error("node '" + node.name + "': unknown op '" + node.op + "'");
    std::vector<const Tensor *> args;
    for (ValueId v : node.inputs)
      args.push_back(&values[v]);
    std::vector<Tensor> results;
    for (ValueId v : node.outputs)
      results.emplace_back(graph.type(v));
    ctx.node_name = node.name;
    Status s = reg->impl.kernel(ctx, args, results, node.attrs);
    if (!s)
      return s.error().withContext("node '" + node.name + "' (" + node.op + ")");
    if (options.after_node)
      KILN_RETURN_IF_ERROR(options.after_node(node, results));
    for (size_t k = 0; k < node.outputs.size(); ++k)
      values[node.outputs[k]] = std::move(results[k]);
    for (ValueId v : node.inputs)
      if (last_use[v] == static_cast<NodeId>(i))
        values[v] = Tensor();
  }

  TensorMap outputs;
  for (const GraphOutput &out : graph.outputs())
    outputs[out.name] = values[out.value];
  return outputs;
}

} // namespace kiln::ops
