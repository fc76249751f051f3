// RecomputePass: see recompute_pass.h. A region (a layer, or its attention
// core) is a set of forward nodes; what of it the backward reads is computed
// again by copies of the nodes it depends on inside the region, reading
// what the region reads from outside (the layer's input, weights, the
// rotary tables) as the originals do. Copies of the same ops on the same
// inputs give the same bits, so the results are those without it.
#include "passes/memory/recompute_pass.h"

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "ir/layer_scope.h"
#include "passes/pass_context.h"
#include "passes/pass_registry.h"

namespace kiln::passes {
namespace {

constexpr const char *kPassName = "RecomputePass";

} // namespace

std::vector<bool> forwardNodes(const Graph &graph) {
  std::vector<bool> forward(graph.numNodes(), false);
  std::vector<NodeId> work;
  auto need = [&](ValueId v) {
    const NodeId p = graph.value(v).producer;
    if (p != kNoNode && !forward[p]) {
      forward[p] = true;
      work.push_back(p);
    }
  };
  for (const GraphOutput &out : graph.outputs())
    if (out.name == "loss" || out.name == "logits")
      need(out.value);
  while (!work.empty()) {
    const NodeId id = work.back();
    work.pop_back();
    for (ValueId in : graph.node(id).inputs)
      need(in);
  }
  return forward;
}

int64_t layerOf(const std::string &name) { return layerAtStart(name); }

namespace {

// The attention core of a layer's forward nodes: each Softmax with what lies
// between it and the BatchMatMul above it (included: the scores) and below it
// (excluded: the context, which reads the probabilities and V).
std::vector<NodeId> attentionCore(const Graph &graph, const std::vector<NodeId> &layer,
                                  const std::vector<std::vector<NodeId>> &users) {
  std::vector<bool> in_layer(graph.numNodes(), false), core(graph.numNodes(), false);
  for (NodeId id : layer)
    in_layer[id] = true;
  for (NodeId softmax : layer) {
    if (graph.node(softmax).op != "Softmax")
      continue;
    core[softmax] = true;
    std::vector<NodeId> up{softmax}, down{softmax};
    while (!up.empty()) {
      const NodeId id = up.back();
      up.pop_back();
      if (graph.node(id).op == "BatchMatMul")
        continue; // the scores: included, not passed
      for (ValueId in : graph.node(id).inputs) {
        const NodeId p = graph.value(in).producer;
        if (p != kNoNode && in_layer[p] && !core[p]) {
          core[p] = true;
          up.push_back(p);
        }
      }
    }
    while (!down.empty()) {
      const NodeId id = down.back();
      down.pop_back();
      for (ValueId out : graph.node(id).outputs)
        for (NodeId u : users[out])
          if (in_layer[u] && !core[u] && graph.node(u).op != "BatchMatMul") {
            core[u] = true;
            down.push_back(u);
          }
    }
  }
  std::vector<NodeId> nodes;
  for (NodeId id : layer)
    if (core[id])
      nodes.push_back(id);
  return nodes;
}

// What the graph knows of each node: whether it is in the forward and the
// layer it belongs to (-1: none).
struct Nodes {
  std::vector<bool> forward;
  std::vector<int64_t> layer;
  std::vector<std::vector<NodeId>> users; // per value
};

// The step's nodes as the rewrites see them, or nothing when the graph has
// no model outputs or no backward (nothing lives from one to the other).
std::optional<Nodes> stepNodes(const Graph &graph) {
  Nodes nodes;
  nodes.forward = forwardNodes(graph);
  if (std::none_of(nodes.forward.begin(), nodes.forward.end(), [](bool f) { return f; }) ||
      std::none_of(nodes.forward.begin(), nodes.forward.end(), [](bool f) { return !f; }))
    return std::nullopt;
  nodes.users = graph.computeUsers();
  for (NodeId id = 0; id < static_cast<NodeId>(graph.numNodes()); ++id) {
    const bool live = nodes.forward[id] && !graph.isErased(id);
    nodes.layer.push_back(live ? layerOf(graph.node(id).name) : -1);
  }
  return nodes;
}

// Whether the backward reads `v` and it is not a checkpoint: a value a
// forward node of another layer (or of none) reads (a layer's output) is
// kept for that layer's own copies anyway.
bool recomputable(ValueId v, int64_t layer, const Nodes &nodes) {
  bool backward = false;
  for (NodeId u : nodes.users[v]) {
    if (nodes.forward[u] && nodes.layer[u] != layer)
      return false;
    backward = backward || !nodes.forward[u];
  }
  return backward;
}

// Copies what the backward reads of `region` (forward nodes of `layer` in
// graph order) and points the backward at the copies, which name `pass` as
// their provenance; returns the nodes copied.
int64_t recomputeRegion(Graph &graph, const std::vector<NodeId> &region, int64_t layer,
                        const Nodes &nodes, const char *pass) {
  const std::vector<bool> &forward = nodes.forward;
  const std::vector<std::vector<NodeId>> &users = nodes.users;
  std::vector<bool> in_region(graph.numNodes(), false), copy(graph.numNodes(), false);
  for (NodeId id : region)
    in_region[id] = true;
  // The region's values the backward reads, and their producers' closure
  // inside the region.
  std::vector<NodeId> work;
  for (NodeId id : region)
    for (ValueId out : graph.node(id).outputs)
      if (!copy[id] && recomputable(out, layer, nodes)) {
        copy[id] = true;
        work.push_back(id);
      }
  while (!work.empty()) {
    const NodeId id = work.back();
    work.pop_back();
    for (ValueId in : graph.node(id).inputs) {
      const NodeId p = graph.value(in).producer;
      if (p != kNoNode && in_region[p] && !copy[p]) {
        copy[p] = true;
        work.push_back(p);
      }
    }
  }
  std::map<ValueId, ValueId> copied; // original value -> its copy
  int64_t count = 0;
  for (NodeId id : region) {
    if (!copy[id])
      continue;
    const Node node = graph.node(id); // a copy: addNode grows the node list
    std::vector<ValueId> inputs;
    for (ValueId in : node.inputs) {
      auto c = copied.find(in);
      inputs.push_back(c == copied.end() ? in : c->second);
    }
    std::vector<TensorType> types;
    for (ValueId out : node.outputs)
      types.push_back(graph.type(out));
    const NodeId clone = graph.addNode(node.op, "recompute." + node.name, std::move(inputs), types,
                                       node.attrs, Provenance{pass, {node.name}});
    for (size_t k = 0; k < node.outputs.size(); ++k)
      copied[node.outputs[k]] = graph.node(clone).outputs[k];
    ++count;
  }
  // The backward reads the copies (a checkpoint copied for another copy's
  // sake stays the original to the backward).
  for (const auto &[original, clone] : copied)
    for (NodeId u : users[original])
      if (!forward[u] && recomputable(original, layer, nodes))
        for (size_t k = 0; k < graph.node(u).inputs.size(); ++k)
          if (graph.node(u).inputs[k] == original)
            graph.setInput(u, k, clone);
  return count;
}

// Erases forward nodes of `region` whose outputs nothing reads any more
// (their only readers were in the backward), last first so that chains go.
int64_t eraseUnread(Graph &graph, const std::vector<NodeId> &region) {
  std::vector<int64_t> readers(graph.numValues(), 0);
  for (NodeId id = 0; id < static_cast<NodeId>(graph.numNodes()); ++id)
    if (!graph.isErased(id))
      for (ValueId in : graph.node(id).inputs)
        ++readers[in];
  for (const GraphOutput &out : graph.outputs())
    ++readers[out.value];
  int64_t erased = 0;
  for (auto it = region.rbegin(); it != region.rend(); ++it) {
    const Node &node = graph.node(*it);
    if (std::any_of(node.outputs.begin(), node.outputs.end(),
                    [&](ValueId v) { return readers[v] > 0; }))
      continue;
    for (ValueId in : node.inputs)
      --readers[in];
    graph.eraseNode(*it);
    ++erased;
  }
  return erased;
}

} // namespace

PassResult recomputeActivations(Graph &graph, const RecomputeSettings &settings) {
  PassResult result;
  if (settings.mode == RecomputeMode::None)
    return result;
  const std::optional<Nodes> step = stepNodes(graph);
  if (!step)
    return result;
  const Nodes &nodes = *step;
  std::map<int64_t, std::vector<NodeId>, std::greater<>> layers; // last layer first
  for (NodeId id = 0; id < static_cast<NodeId>(nodes.layer.size()); ++id)
    if (nodes.layer[id] >= 0 && settings.covers(nodes.layer[id]))
      layers[nodes.layer[id]].push_back(id);
  for (const auto &[layer, members] : layers) {
    const std::vector<NodeId> region =
        settings.mode == RecomputeMode::Full ? members : attentionCore(graph, members, nodes.users);
    ++result.match_times;
    const int64_t copies = recomputeRegion(graph, region, layer, nodes, kPassName);
    if (copies == 0) {
      result.rejections.push_back(
          {graph.node(members.front()).name,
           "layer " + std::to_string(layer) + ": the backward reads nothing of its " +
               std::string(settings.mode == RecomputeMode::Full ? "forward" : "attention core")});
      continue;
    }
    ++result.effect_times;
    result.statistics["recomputed_nodes"] += copies;
    result.statistics["erased_forward_nodes"] += eraseUnread(graph, region);
  }
  result.statistics["layers"] = result.effect_times;
  return result;
}

PassResult regatherSequenceSlices(Graph &graph) {
  PassResult result;
  const std::optional<Nodes> step = stepNodes(graph);
  if (!step)
    return result;
  const Nodes &nodes = *step;
  std::vector<NodeId> gathers;
  for (NodeId id = 0; id < static_cast<NodeId>(nodes.forward.size()); ++id)
    if (nodes.forward[id] && !graph.isErased(id) && graph.node(id).op == "TensorParallelAllGather")
      gathers.push_back(id);
  // Last first, as recomputeActivations appends its copies. A region is the
  // gather and the reshapes that view its output (the projections read the
  // sequence flattened), in graph order.
  for (auto it = gathers.rbegin(); it != gathers.rend(); ++it) {
    ++result.match_times;
    std::vector<NodeId> region{*it};
    for (size_t k = 0; k < region.size(); ++k)
      for (ValueId out : graph.node(region[k]).outputs)
        for (NodeId u : nodes.users[out])
          if (nodes.forward[u] && graph.node(u).op == "Reshape" &&
              std::find(region.begin(), region.end(), u) == region.end())
            region.push_back(u);
    std::sort(region.begin(), region.end());
    if (recomputeRegion(graph, region, nodes.layer[*it], nodes, kSequenceRegatherPassName) == 0) {
      result.rejections.push_back(
          {graph.node(*it).name, "the backward reads nothing of the gathered sequence"});
      continue;
    }
    ++result.effect_times;
  }
  result.statistics["regathered"] = result.effect_times;
  return result;
}

const PassInfo &RecomputePass::info() const {
  static const PassInfo info{
      .name = kPassName,
      .group = PassGroup::StepRewrite,
      .default_on = true,
      .may_disable = true,
      .summary = "Recomputes activations before their backward use instead of keeping them "
                 "(--recompute)",
      .description =
          "With --recompute full, each transformer layer keeps only its input: the forward "
          "values its backward reads are computed again from the input and the weights just "
          "before the layer's backward. With selective, only the attention core (scores, "
          "scale, mask, softmax, the s x s tensors) is recomputed. The copies are the same ops "
          "on the same inputs, so results are bit for bit those without recomputation; the "
          "memory plan sees the shorter live ranges. Does nothing under --recompute none or on "
          "a graph without a backward.",
      .options = recomputeOptions()};
  return info;
}

Verdict RecomputePass::appliesTo(const PassContext &ctx) const {
  if (recomputeSettings(ctx).mode == RecomputeMode::None)
    return Verdict::forbid("the job recomputes nothing (--recompute none)");
  return Verdict::allow();
}

Expected<PassResult> RecomputePass::run(Graph &graph, const PassContext &ctx) const {
  return recomputeActivations(graph, recomputeSettings(ctx));
}

KILN_REGISTER_PASS(RecomputePass);

} // namespace kiln::passes
