#include "passes/precision/retype.h"

#include <algorithm>
#include <map>

#include "ops/op_registry.h"

namespace kiln::passes {

namespace {

class Retyper {
public:
  Retyper(Graph &graph, const std::string &pass) : graph_(graph), pass_(pass) {}

  // The value `v` holds as `dtype`: itself, or a (shared) Cast of it.
  ValueId as(ValueId v, DType dtype) {
    if (graph_.type(v).dtype == dtype)
      return v;
    auto key = std::make_pair(v, dtype);
    if (auto it = casts_.find(key); it != casts_.end())
      return it->second;
    TensorType type{dtype, graph_.type(v).shape};
    NodeId cast = graph_.addNode(
        "Cast", uniqueName(graph_.valueName(v) + ".to_" + std::string(dtypeName(dtype))), {v},
        {type}, AttrMap{{"dtype", dtype}}, Provenance{pass_, {graph_.valueName(v)}});
    ValueId out = graph_.node(cast).outputs[0];
    casts_[key] = out;
    return out;
  }

  // Adding a Cast may move the node table: nodes are re-fetched by id.
  Status retypeNode(NodeId id, const NodeRetype &r, std::vector<DTypeDecision> &decisions) {
    const size_t num_inputs = graph_.node(id).inputs.size();
    if (graph_.node(id).op == "Cast" || !r.dtype) {
      // Keeps its own dtypes: inputs that producers re-typed are cast back.
      if (graph_.node(id).op != "Cast")
        for (size_t k = 0; k < num_inputs; ++k) {
          ValueId in = graph_.node(id).inputs[k];
          graph_.setInput(id, k, as(in, original_[in]));
        }
      return Status::ok();
    }
    const DType d = *r.dtype;
    const ops::RegisteredOp *reg = ops::opsOf(graph_).find(graph_.node(id).op);
    if (!reg)
      return Error("node '" + graph_.node(id).name + "': unknown op '" + graph_.node(id).op + "'");
    for (size_t k = 0; k < num_inputs; ++k) {
      ValueId in = graph_.node(id).inputs[k];
      // Only float data follows the compute dtype (not indices or labels),
      // and only where the op's definition takes it (a loss's incoming
      // gradient is f32 by definition): elsewhere the input keeps its dtype.
      if (!isFloat(original_[in]))
        continue;
      const ops::OperandDef &def =
          reg->def.inputs[std::min(k, reg->def.inputs.size() - 1)]; // variadic: the last
      const bool takes = def.dtypes.empty() ||
                         std::find(def.dtypes.begin(), def.dtypes.end(), d) != def.dtypes.end();
      graph_.setInput(id, k, as(in, takes ? d : original_[in]));
    }
    Node &n = graph_.node(id);
    for (const auto &[key, value] : r.attr_overrides)
      n.attrs.set(key, value);
    if (n.op == "Fill" && isFloat(n.attrs.getDType("dtype")))
      n.attrs.set("dtype", d);
    // A mask that fills with the dtype's lowest value keeps meaning that; a
    // gradient's mask (fill 0) keeps its fill.
    if (n.op == "CausalMask" && n.attrs.getFloat("fill") == lowestFinite(original_[n.outputs[0]]))
      n.attrs.set("fill", lowestFinite(d));
    std::vector<TensorType> in_types;
    for (ValueId v : n.inputs)
      in_types.push_back(graph_.type(v));
    auto out_types = reg->impl.infer(in_types, n.attrs);
    if (!out_types)
      return out_types.error().withContext("re-typing node '" + n.name + "' to " +
                                           std::string(dtypeName(d)));
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const DType from = graph_.type(n.outputs[k]).dtype, to = (*out_types)[k].dtype;
      graph_.setType(n.outputs[k], (*out_types)[k]);
      if (k == 0 && from != to)
        decisions.push_back({n.name, from, to, r.why});
    }
    return Status::ok();
  }

  Expected<std::vector<DTypeDecision>> run(const RetypePlan &plan) {
    for (size_t v = 0; v < graph_.numValues(); ++v)
      original_.push_back(graph_.type(static_cast<ValueId>(v)).dtype);
    std::vector<DTypeDecision> decisions;
    const NodeId n = static_cast<NodeId>(graph_.numNodes());
    for (NodeId id = 0; id < n; ++id)
      if (!graph_.isErased(id))
        KILN_RETURN_IF_ERROR(retypeNode(id, plan[id], decisions));
    // The graph's outputs keep their types.
    for (GraphOutput &out : graph_.mutableOutputs())
      out.value = as(out.value, original_[out.value]);
    return decisions;
  }

private:
  std::string uniqueName(std::string name) {
    if (graph_.findNode(name) == kNoNode)
      return name;
    for (int i = 1;; ++i)
      if (std::string n = name + "." + std::to_string(i); graph_.findNode(n) == kNoNode)
        return n;
  }

  Graph &graph_;
  const std::string &pass_;
  std::vector<DType> original_; // each value's dtype before re-typing
  std::map<std::pair<ValueId, DType>, ValueId> casts_;
};

} // namespace

Expected<std::vector<DTypeDecision>> applyRetype(Graph &graph, const RetypePlan &plan,
                                                 const std::string &pass) {
  if (plan.size() != graph.numNodes())
    return Error("pass '" + pass + "': the re-typing plan covers " + std::to_string(plan.size()) +
                 " nodes, the graph has " + std::to_string(graph.numNodes()));
  return Retyper(graph, pass).run(plan);
}

} // namespace kiln::passes
