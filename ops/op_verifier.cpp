#include "ops/op_verifier.h"

#include <algorithm>

#include "ir/verifier.h"

namespace kiln::ops {
namespace {

Status verifyNode(const Graph &graph, const Node &node, const OpRegistry &registry) {
  const std::string where = "node '" + node.name + "'";
  const RegisteredOp *reg = registry.find(node.op);
  if (!reg)
    return Error(where + ": unknown op '" + node.op + "'");
  const OpDef &def = reg->def;
  std::vector<TensorType> in_types;
  for (ValueId in : node.inputs)
    in_types.push_back(graph.type(in));
  KILN_RETURN_IF_ERROR(checkInputs(def, in_types, where));
  KILN_ASSIGN_OR_RETURN(AttrMap complete, completeAttrs(def, node.attrs, where));
  // completeAttrs only adds defaults, so a larger map means some were missing.
  // (Comparing maps would reject NaN-valued attributes: NaN != NaN.)
  if (complete.size() != node.attrs.size())
    return Error(where + ": attributes are incomplete (every attribute must be explicit)");
  auto inferred = reg->impl.infer(in_types, complete);
  if (!inferred)
    return inferred.error().withContext(where);
  if (inferred->size() != node.outputs.size())
    return Error(where + ": op " + def.name + " produces " + std::to_string(inferred->size()) +
                 " outputs, node has " + std::to_string(node.outputs.size()));
  for (size_t i = 0; i < inferred->size(); ++i) {
    const TensorType &recorded = graph.type(node.outputs[i]);
    if (!((*inferred)[i] == recorded))
      return Error(where + ": output " + std::to_string(i) + " is recorded as " +
                   typeToString(recorded) + " but " + def.name + " gives " +
                   typeToString((*inferred)[i]));
    const OperandDef &operand = def.outputs[std::min(i, def.outputs.size() - 1)];
    if (!operand.dtypes.empty() && std::find(operand.dtypes.begin(), operand.dtypes.end(),
                                             recorded.dtype) == operand.dtypes.end())
      return Error(where + ": output '" + operand.name + "' of " + def.name + " cannot be " +
                   std::string(dtypeName(recorded.dtype)));
  }
  return Status::ok();
}

} // namespace

Status verifyGraph(const Graph &graph) {
  const OpRegistry &registry = opsOf(graph);
  KILN_RETURN_IF_ERROR(verifyStructure(graph));
  for (const Node &node : graph.nodes())
    KILN_RETURN_IF_ERROR(verifyNode(graph, node, registry));
  return Status::ok();
}

} // namespace kiln::ops
