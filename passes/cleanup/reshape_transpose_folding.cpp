// Folds Reshape(Reshape(x)) and Transpose(Transpose(x)) and removes identity
// Reshapes and Transposes. One walk in node order: each node's inputs are
// first redirected past nodes removed earlier, so chains fold completely.
#include "passes/cleanup/reshape_transpose_folding.h"

#include <algorithm>
#include <string>
#include <vector>

#include "passes/pass_context.h"
#include "passes/pass_registry.h"

namespace kiln::passes {
namespace {

constexpr const char *kPassName = "ReshapeTransposeFoldingPass";

bool isIdentityPerm(const std::vector<int64_t> &perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i))
      return false;
  return true;
}

// The original nodes `node` stands for: its own name, or what this pass
// recorded when it rewrote the node before.
std::vector<std::string> standsFor(const Node &node) {
  if (node.provenance.pass == kPassName && !node.provenance.origins.empty())
    return node.provenance.origins;
  return {node.name};
}

class Folder {
public:
  explicit Folder(Graph &graph)
      : graph_(graph), replacement_(graph.numValues()), uses_(graph.numValues(), 0),
        touched_(graph.numNodes(), false) {
    for (size_t v = 0; v < replacement_.size(); ++v)
      replacement_[v] = static_cast<ValueId>(v);
    for (NodeId id = 0; id < static_cast<NodeId>(graph.numNodes()); ++id)
      if (!graph.isErased(id))
        for (ValueId in : graph.node(id).inputs)
          ++uses_[in];
    for (const GraphOutput &out : graph.outputs())
      ++uses_[out.value];
  }

  PassResult run() {
    for (NodeId id = 0; id < static_cast<NodeId>(graph_.numNodes()); ++id) {
      if (graph_.isErased(id))
        continue;
      Node &node = graph_.node(id);
      // Counts moved to the replacement when it was made; only the edges move now.
      for (size_t i = 0; i < node.inputs.size(); ++i)
        if (replacement_[node.inputs[i]] != node.inputs[i])
          graph_.setInput(id, i, replacement_[node.inputs[i]]);
      if (node.op == "Reshape" || node.op == "Transpose")
        visit(id);
    }
    for (GraphOutput &out : graph_.mutableOutputs())
      out.value = replacement_[out.value];
    result_.effect_times = std::count(touched_.begin(), touched_.end(), true);
    for (const char *key : {"reshapes_composed", "transposes_composed", "identities_removed"})
      result_.statistics.try_emplace(key, 0);
    result_.statistics["nodes_removed"] = removed_;
    return std::move(result_);
  }

private:
  void visit(NodeId id) {
    Node &node = graph_.node(id);
    const bool reshape = node.op == "Reshape";
    const NodeId inner_id = graph_.value(node.inputs[0]).producer;
    const bool chain = inner_id != kNoNode && graph_.node(inner_id).op == node.op;
    const bool identity =
        reshape ? graph_.type(node.inputs[0]).shape == graph_.type(node.outputs[0]).shape
                : isIdentityPerm(node.attrs.getInts("perm"));
    if (!chain && !identity)
      return;
    ++result_.match_times;
    if (node.group != kNoGroup) {
      result_.reject(node, "it belongs to fusion group '" + graph_.group(node.group).name + "'");
      return;
    }
    if (chain) {
      const Node &inner = graph_.node(inner_id);
      if (inner.group != kNoGroup) {
        result_.reject(node, "its input '" + inner.name + "' belongs to fusion group '" +
                                 graph_.group(inner.group).name + "'");
        return;
      }
      compose(id, inner_id);
    }
    if (graph_.type(node.inputs[0]).shape == graph_.type(node.outputs[0]).shape &&
        (reshape || isIdentityPerm(node.attrs.getInts("perm"))))
      removeIdentity(id);
  }

  // node(inner(x)) -> node(x), with the composed perm for Transposes.
  void compose(NodeId id, NodeId inner_id) {
    Node &node = graph_.node(id);
    const Node &inner = graph_.node(inner_id);
    const ValueId x = inner.inputs[0], via = node.inputs[0];
    if (node.op == "Transpose") {
      const std::vector<int64_t> &outer = node.attrs.getInts("perm");
      const std::vector<int64_t> &first = inner.attrs.getInts("perm");
      std::vector<int64_t> perm(outer.size());
      for (size_t i = 0; i < perm.size(); ++i)
        perm[i] = first[outer[i]];
      node.attrs.set("perm", perm);
    }
    std::vector<std::string> origins = standsFor(node);
    for (std::string &name : standsFor(inner))
      if (std::find(origins.begin(), origins.end(), name) == origins.end())
        origins.push_back(std::move(name));
    node.provenance = Provenance{kPassName, std::move(origins)};
    graph_.setInput(id, 0, x);
    ++uses_[x];
    touched_[id] = true;
    ++result_.statistics[node.op == "Reshape" ? "reshapes_composed" : "transposes_composed"];
    if (--uses_[via] == 0) {
      graph_.eraseNode(inner_id);
      --uses_[x];
      touched_[inner_id] = true;
      ++removed_;
    }
  }

  void removeIdentity(NodeId id) {
    const Node &node = graph_.node(id);
    const ValueId x = node.inputs[0], y = node.outputs[0];
    replacement_[y] = x;
    uses_[x] += uses_[y] - 1; // y's users become x's; this node's own use goes
    uses_[y] = 0;
    graph_.eraseNode(id);
    touched_[id] = true;
    ++removed_;
    ++result_.statistics["identities_removed"];
  }

  Graph &graph_;
  std::vector<ValueId> replacement_; // what each value's users read instead
  std::vector<int64_t> uses_;        // uses after replacement, graph outputs included
  std::vector<bool> touched_;        // nodes rewritten or removed
  int64_t removed_ = 0;
  PassResult result_;
};

} // namespace

PassResult foldReshapesAndTransposes(Graph &graph) { return Folder(graph).run(); }

const PassInfo &ReshapeTransposeFoldingPass::info() const {
  static const PassInfo info{
      .name = kPassName,
      .group = PassGroup::Cleanup,
      .default_on = true,
      .may_disable = true,
      .summary = "Folds Reshape and Transpose chains and removes identity ones",
      .description =
          "Reshape(Reshape(x)) becomes Reshape(x); Transpose(Transpose(x)) becomes one Transpose "
          "with the composed perm, or x when the composition is the identity; a Reshape to its "
          "input's own shape and an identity Transpose are replaced by their input. The "
          "rewritten node keeps its name and records the nodes it stands for; an inner node "
          "left without users is removed. Nodes in fusion groups are left alone."};
  return info;
}

Expected<PassResult> ReshapeTransposeFoldingPass::run(Graph &graph, const PassContext &) const {
  return foldReshapesAndTransposes(graph);
}

KILN_REGISTER_PASS(ReshapeTransposeFoldingPass);

} // namespace kiln::passes
