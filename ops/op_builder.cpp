#include "ops/op_builder.h"

namespace kiln::ops {

OpBuilder::OpBuilder(Graph &graph) : graph_(graph), registry_(opsOf(graph)) {
  for (const GraphInput &in : graph.inputs())
    names_.insert(in.name);
  for (const Node &n : graph.nodes())
    names_.insert(n.name);
}

OpBuilder::ScopeGuard OpBuilder::scope(std::string_view name) {
  scopes_.emplace_back(name);
  return ScopeGuard(*this);
}

std::string OpBuilder::scopedName(std::string_view name) const {
  std::string s;
  for (const std::string &scope : scopes_) {
    if (scope.empty())
      continue;
    s += scope;
    s += '.';
  }
  return s + std::string(name);
}

std::string OpBuilder::uniqueName(std::string name) {
  if (names_.insert(name).second)
    return name;
  for (int i = 1;; ++i) {
    std::string candidate = name + "_" + std::to_string(i);
    if (names_.insert(candidate).second)
      return candidate;
  }
}

void OpBuilder::fail(Error error) {
  if (status_)
    status_ = Status(std::move(error));
}

Expected<std::vector<ValueId>> OpBuilder::tryCreate(std::string_view op, std::string_view name,
                                                    std::vector<ValueId> inputs,
                                                    const AttrMap &attrs) {
  std::string full_name = scopedName(name);
  const RegisteredOp *reg = registry_.find(op);
  if (!reg)
    return Error(full_name + ": unknown op '" + std::string(op) + "'");
  const OpDef &def = reg->def;
  std::vector<TensorType> in_types;
  for (ValueId v : inputs) {
    if (v < 0 || static_cast<size_t>(v) >= graph_.numValues())
      return Error(full_name + ": input refers to no value");
    in_types.push_back(graph_.type(v));
  }
  KILN_RETURN_IF_ERROR(checkInputs(def, in_types, full_name));
  KILN_ASSIGN_OR_RETURN(AttrMap complete, completeAttrs(def, attrs, full_name));
  auto out_types = reg->impl.infer(in_types, complete);
  if (!out_types)
    return out_types.error().withContext(full_name + " (" + def.name + ")");
  for (const TensorType &t : *out_types)
    if (!checkedByteSize(t))
      return Error(full_name + " (" + def.name + "): its output " + typeToString(t) +
                   " needs more than 2^63 bytes; a size (batch, sequence length, hidden size) is "
                   "too large");
  NodeId id = graph_.addNode(def.name, uniqueName(std::move(full_name)), std::move(inputs),
                             *out_types, std::move(complete), provenance_);
  return graph_.node(id).outputs;
}

std::vector<ValueId> OpBuilder::createMulti(std::string_view op, std::string_view name,
                                            std::vector<ValueId> inputs, const AttrMap &attrs) {
  for (ValueId v : inputs)
    if (v == kNoValue) {
      if (status_)
        fail(Error(scopedName(name) + ": an input is missing"));
      return {};
    }
  auto result = tryCreate(op, name, std::move(inputs), attrs);
  if (!result) {
    fail(result.error());
    return {};
  }
  return std::move(result).value();
}

ValueId OpBuilder::create(std::string_view op, std::string_view name, std::vector<ValueId> inputs,
                          const AttrMap &attrs) {
  std::vector<ValueId> outs = createMulti(op, name, std::move(inputs), attrs);
  if (outs.size() != 1) {
    if (!outs.empty())
      fail(Error(scopedName(name) + ": op " + std::string(op) + " has " +
                 std::to_string(outs.size()) + " outputs, expected one"));
    return kNoValue;
  }
  return outs[0];
}

ValueId OpBuilder::constant(double value, DType dtype, std::string_view name, Shape shape) {
  return create("Fill", name, {}, {{"value", value}, {"dtype", dtype}, {"shape", shape}});
}

} // namespace kiln::ops
