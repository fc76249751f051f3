// TbeEltwiseFusionPass: producer-consumer fusion of elementwise and broadcast
// ops into vector kernels ("eltwise").
//
// Greedy, in graph order. The first ungrouped elementwise/broadcast node
// seeds a group; its neighbours (producers of its inputs, users of its
// outputs) become candidates, tried lowest node id first. A candidate joins
// when it is elementwise or broadcast, not in a group yet, the group stays
// convex, and the group still fits the UB (passes/fusion/ub_budget.h); each
// joined node adds its own neighbours. Fill constants used only inside join
// at the end. Then the next seed.
//
//   a --> b --> d = Add(b, r)     seed a: b joins; d would make the path
//    \--> Reshape --> r           a -> Reshape -> d leave the group and come
//                                 back: refused (convexity), reported on d
//
// A group needs two ops. Intermediates are Storage: the vector unit rounds
// each op's result to its dtype, as the unfused ops would, so fusing changes
// no bit of any result.
#include <queue>
#include <unordered_set>

#include "ops/op_registry.h"
#include "passes/fusion/fusion_group_util.h"
#include "passes/fusion/ub_budget.h"
#include "passes/pass_context.h"
#include "passes/pass_registry.h"

namespace kiln::passes {
namespace {

constexpr const char *kPassName = "TbeEltwiseFusionPass";

bool vectorOp(const Graph &graph, const Node &node) {
  const ops::RegisteredOp *reg = ops::opsOf(graph).find(node.op);
  return reg && reg->def.kind <= ops::OpKind::Broadcast;
}

// Grows one group from `seed`; returns its members (the seed alone when
// nothing could join). Counts whether any vector op neighboured it.
class GroupGrower {
public:
  GroupGrower(const FusionView &view, const target::Target &target, PassResult &result)
      : view_(view), graph_(view.graph()), target_(target), result_(result) {}

  std::vector<NodeId> grow(NodeId seed, bool &had_candidate) {
    std::vector<NodeId> members{seed};
    std::priority_queue<NodeId, std::vector<NodeId>, std::greater<>> queue;
    std::unordered_set<NodeId> tried{seed};
    auto pushNeighbours = [&](NodeId n) {
      for (ValueId v : graph_.node(n).inputs)
        if (NodeId p = view_.producer(v); p != kNoNode && tried.insert(p).second)
          queue.push(p);
      for (ValueId v : graph_.node(n).outputs)
        for (NodeId u : view_.users(v))
          if (tried.insert(u).second)
            queue.push(u);
    };
    pushNeighbours(seed);
    const std::string group = "fused." + graph_.node(seed).name;
    had_candidate = false;
    while (!queue.empty()) {
      NodeId c = queue.top();
      queue.pop();
      const Node &node = graph_.node(c);
      if (!vectorOp(graph_, node) || node.op == "Fill")
        continue; // not a candidate, and not worth a line in the report
      had_candidate = true;
      if (node.group != kNoGroup) {
        // Groups this pass made were decided already, with their own report lines.
        if (graph_.group(node.group).formed_by != kPassName)
          reject(node, checkUngrouped(graph_, {c}).reason(), "already_grouped");
        continue;
      }
      members.push_back(c);
      if (Verdict why = checkConvex(view_, members); !why) {
        members.pop_back();
        reject(node, "joining '" + group + "': " + why.reason(), "convexity_rejections");
        continue;
      }
      UbUsage usage = ubUsage(view_, members, target_.vector_tile_elements);
      if (Verdict why = checkUbBudget(usage, target_); !why) {
        members.pop_back();
        reject(node, "joining '" + group + "': the kernel " + why.reason(), "budget_rejections");
        continue;
      }
      pushNeighbours(c);
    }
    // Absorbing a private splat trades an input's two buffers for one.
    absorbPrivateFills(view_, members);
    return members;
  }

private:
  void reject(const Node &node, const std::string &why, const char *counter) {
    result_.reject(node, node.op + " '" + node.name + "' not fused: " + why);
    ++result_.statistics[counter];
  }

  const FusionView &view_;
  const Graph &graph_;
  const target::Target &target_;
  PassResult &result_;
};

class TbeEltwiseFusionPass final : public Pass {
public:
  const PassInfo &info() const override {
    static const PassInfo info{
        .name = kPassName,
        .group = PassGroup::UBFusion,
        .default_on = true,
        .may_disable = true,
        .summary = "Fuses chains and DAGs of elementwise and broadcast ops into vector kernels",
        .description =
            "Grows groups greedily in graph order from each ungrouped elementwise or broadcast op "
            "(Add, Mul, Sub, Div, Neg, Exp, Silu, SiluGrad, Cast, RsqrtGrad, BiasAdd, Fill, ...) "
            "through its producers and users of the same kinds, into one 'eltwise' kernel per "
            "group with Storage intermediates (each op rounds as unfused, so results do not "
            "change). A node joins only if the group stays convex and fits the target's Unified "
            "Buffer: one buffer of vector_tile_elements elements per input and output (both "
            "double-buffered) and per intermediate must fit memory.ub_bytes. A group needs two "
            "ops; nodes already in a group are left alone."};
    return info;
  }

  Expected<PassResult> run(Graph &graph, const PassContext &ctx) const override {
    PassResult result;
    FusionView view(graph);
    GroupGrower grower(view, ctx.target(), result);
    int64_t fused_nodes = 0;
    for (NodeId seed = 0; seed < static_cast<NodeId>(graph.numNodes()); ++seed) {
      const Node &node = graph.node(seed);
      if (graph.isErased(seed) || node.group != kNoGroup || !vectorOp(graph, node) ||
          node.op == "Fill")
        continue;
      bool had_candidate = false;
      std::vector<NodeId> members = grower.grow(seed, had_candidate);
      if (had_candidate)
        ++result.match_times;
      if (members.size() < 2)
        continue;
      formGroup(graph, members, seed, "eltwise", kPassName, Intermediates::Storage);
      ++result.effect_times;
      fused_nodes += static_cast<int64_t>(members.size());
    }
    result.statistics["nodes_fused"] = fused_nodes;
    return result;
  }
};

} // namespace

KILN_REGISTER_PASS(TbeEltwiseFusionPass);

} // namespace kiln::passes
