#include "ops/interpreter.h"

namespace kiln::ops {
namespace {

// The type a value has while it stays inside an F32 fusion group.
TensorType heldType(const TensorType &t) {
  return isFloat(t.dtype) ? TensorType{DType::F32, t.shape} : t;
}

class Interpreter {
public:
  Interpreter(const Graph &graph, const InterpretOptions &options, const OpRegistry &registry)
      : graph_(graph), options_(options), registry_(registry), values_(graph.numValues()) {
    ctx_.overflow = options.overflow;
  }

  Expected<TensorMap> run(const TensorMap &inputs) {
    KILN_RETURN_IF_ERROR(bindGraphInputs(graph_, inputs, values_));
    computeLastUse();

    const NodeId n = static_cast<NodeId>(graph_.numNodes());
    for (NodeId i = 0; i < n;) {
      GroupId g = graph_.node(i).group;
      if (g != kNoGroup && options_.fused_numerics &&
          graph_.group(g).intermediates == Intermediates::F32) {
        NodeId end = i;
        while (end < n && graph_.node(end).group == g)
          ++end;
        KILN_RETURN_IF_ERROR(runF32Group(i, end));
        i = end;
      } else {
        KILN_RETURN_IF_ERROR(runNode(i));
        ++i;
      }
    }

    TensorMap outputs;
    for (const GraphOutput &out : graph_.outputs())
      outputs[out.name] = values_[out.value];
    return outputs;
  }

private:
  // Last node that reads each value; graph outputs are kept to the end.
  void computeLastUse() {
    last_use_.assign(graph_.numValues(), kNoNode);
    for (size_t i = 0; i < graph_.numNodes(); ++i)
      for (ValueId v : graph_.node(static_cast<NodeId>(i)).inputs)
        last_use_[v] = static_cast<NodeId>(i);
    for (const GraphOutput &out : graph_.outputs())
      last_use_[out.value] = static_cast<NodeId>(graph_.numNodes());
  }

  void release(NodeId i) {
    for (ValueId v : graph_.node(i).inputs)
      if (last_use_[v] == i)
        values_[v] = Tensor();
  }

  Expected<std::vector<Tensor>> evaluate(const Node &node, const std::vector<const Tensor *> &args,
                                         std::vector<Tensor> results) {
    const RegisteredOp *reg = registry_.find(node.op);
    if (!reg)
      return Error("node '" + node.name + "': unknown op '" + node.op + "'");
    ctx_.node_name = node.name;
    Status s = reg->impl.kernel(ctx_, args, results, node.attrs);
    if (!s)
      return s.error().withContext("node '" + node.name + "' (" + node.op + ")");
    if (options_.after_node)
      KILN_RETURN_IF_ERROR(options_.after_node(node, results));
    return results;
  }

  Status runNode(NodeId i) {
    const Node &node = graph_.node(i);
    std::vector<const Tensor *> args;
    for (ValueId v : node.inputs)
      args.push_back(&values_[v]);
    std::vector<Tensor> results;
    for (ValueId v : node.outputs)
      results.emplace_back(graph_.type(v));
    KILN_ASSIGN_OR_RETURN(results, evaluate(node, args, std::move(results)));
    for (size_t k = 0; k < node.outputs.size(); ++k)
      values_[node.outputs[k]] = std::move(results[k]);
    release(i);
    return Status::ok();
  }

  // Nodes [begin, end) form one F32 group. Inputs from outside are widened to
  // f32 (exactly); results are computed into f32 tensors, except that a Cast
  // rounds to its target type first; values leaving the group are rounded to
  // their dtype once, as the kernel's store would.
  Status runF32Group(NodeId begin, NodeId end) {
    std::unordered_map<ValueId, Tensor> held;
    auto heldValue = [&](ValueId v) -> const Tensor & {
      auto it = held.find(v);
      if (it != held.end())
        return it->second;
      const Tensor &t = values_[v];
      Tensor &widened = held[v];
      widened = t.dtype() == heldType(t.type()).dtype ? t : t.castTo(DType::F32);
      return widened;
    };
    for (NodeId i = begin; i < end; ++i) {
      const Node &node = graph_.node(i);
      std::vector<const Tensor *> args;
      for (ValueId v : node.inputs)
        args.push_back(&heldValue(v));
      const bool rounds = node.op == "Cast";
      std::vector<Tensor> results;
      for (ValueId v : node.outputs)
        results.emplace_back(rounds ? graph_.type(v) : heldType(graph_.type(v)));
      KILN_ASSIGN_OR_RETURN(results, evaluate(node, args, std::move(results)));
      for (size_t k = 0; k < node.outputs.size(); ++k) {
        Tensor &r = results[k];
        held[node.outputs[k]] =
            r.dtype() == heldType(r.type()).dtype ? std::move(r) : r.castTo(DType::F32);
      }
    }
    for (NodeId i = begin; i < end; ++i) {
      for (ValueId out : graph_.node(i).outputs)
        if (last_use_[out] >= end)
          values_[out] = held[out].castTo(graph_.type(out).dtype, options_.overflow);
      release(i);
    }
    return Status::ok();
  }

  const Graph &graph_;
  const InterpretOptions &options_;
  const OpRegistry &registry_;
  KernelContext ctx_;
  std::vector<Tensor> values_;
  std::vector<NodeId> last_use_;
};

} // namespace

Status bindGraphInputs(const Graph &graph, const TensorMap &inputs, std::vector<Tensor> &values) {
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
  return Status::ok();
}

Expected<TensorMap> interpret(const Graph &graph, const TensorMap &inputs,
                              const InterpretOptions &options) {
  return Interpreter(graph, options, opsOf(graph)).run(inputs);
}

} // namespace kiln::ops
