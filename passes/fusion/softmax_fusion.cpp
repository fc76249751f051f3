// SoftmaxFusionPass: attention's row softmax with its prologue as one
// "softmax" kernel, and SoftmaxGrad with its elementwise neighbours as one
// "softmax_grad" kernel, both computing in f32.
//
// Forward, anchored at a Softmax over the last axis, walking back through
// whatever of the prologue is there and not grouped yet:
//   (Div | Mul by a splat)? -> CausalMask? -> Softmax
// Backward, anchored at a SoftmaxGrad over the last axis: grows in node order
// through producers and users that are vector ops on exactly the same rows
// (output of the SoftmaxGrad's shape, every other input a splat or of that
// shape) — in attention, the masked and scaled gradient of the scores.
#include <queue>
#include <unordered_set>

#include "ops/op_registry.h"
#include "passes/fusion/fusion_group_util.h"
#include "passes/pass_context.h"
#include "passes/pass_registry.h"

namespace kiln::passes {
namespace {

constexpr const char *kPassName = "SoftmaxFusionPass";

std::string describe(const Node &node) { return node.op + " '" + node.name + "'"; }

// Allows a Softmax/SoftmaxGrad that works on rows of its last axis.
Verdict checkLastAxis(const Graph &g, const Node &node) {
  int64_t rank = g.type(node.inputs[0]).rank();
  int64_t axis = node.attrs.getInt("axis");
  if (axis == rank - 1 || axis == -1)
    return Verdict::allow();
  return Verdict::forbid(describe(node) + " normalises axis " + std::to_string(axis) +
                         " of a rank-" + std::to_string(rank) +
                         " input; the kernel works on rows of the last axis");
}

// The scaled operand of Div(x, splat) or Mul(x, splat)/Mul(splat, x), else kNoValue.
ValueId scaledOperand(const FusionView &view, const Node &node) {
  if (node.op == "Div" && isSplat(view, node.inputs[1]))
    return node.inputs[0];
  if (node.op == "Mul") {
    if (isSplat(view, node.inputs[1]))
      return node.inputs[0];
    if (isSplat(view, node.inputs[0]))
      return node.inputs[1];
  }
  return kNoValue;
}

class SoftmaxFusionPass final : public Pass {
public:
  const PassInfo &info() const override {
    static const PassInfo info{
        .name = kPassName,
        .group = PassGroup::UBFusion,
        .default_on = true,
        .may_disable = true,
        .summary = "Fuses scale -> CausalMask -> Softmax, and SoftmaxGrad with its neighbours",
        .description =
            "Forward: a Softmax over the last axis with whatever is present and ungrouped of its "
            "prologue (Div or Mul by a splat, then CausalMask) becomes one 'softmax' kernel. "
            "Backward: a SoftmaxGrad over the last axis with the elementwise and broadcast ops "
            "around it on the same rows (the output shape of the SoftmaxGrad; other inputs "
            "splats or of that shape), such as the masked and scaled gradient of the scores, "
            "becomes one 'softmax_grad' kernel. Both keep intermediates in f32. A group needs "
            "two ops and must be convex."};
    return info;
  }

  Expected<PassResult> run(Graph &graph, const PassContext &) const override {
    PassResult result;
    FusionView view(graph);
    for (NodeId id = 0; id < static_cast<NodeId>(graph.numNodes()); ++id) {
      const std::string &op = graph.node(id).op;
      if (op == "Softmax")
        fuseForward(graph, view, id, result);
      else if (op == "SoftmaxGrad")
        fuseBackward(graph, view, id, result);
    }
    return result;
  }

private:
  // Checks the anchor itself: last axis, not grouped.
  static Verdict checkAnchor(const Graph &graph, NodeId anchor) {
    return checkLastAxis(graph, graph.node(anchor)).andThen([&] {
      return checkUngrouped(graph, {anchor});
    });
  }

  static void fuseForward(Graph &graph, const FusionView &view, NodeId sm, PassResult &result) {
    ++result.match_times;
    const Node &s = graph.node(sm);
    if (Verdict why = checkAnchor(graph, sm); !why)
      return result.reject(s, why);
    std::vector<NodeId> members{sm};
    std::string stopped; // why the prologue ends where it does
    ValueId v = s.inputs[0];
    auto take = [&](NodeId p) {
      if (Verdict why = checkUngrouped(graph, {p}); !why) {
        stopped = why.reason();
        result.reject(graph.node(p),
                      "left out of the softmax kernel of '" + s.name + "': " + why.reason());
        return false;
      }
      members.push_back(p);
      return true;
    };
    NodeId p = view.producer(v);
    if (p != kNoNode && graph.node(p).op == "CausalMask") {
      if (!take(p))
        p = kNoNode;
      else
        p = view.producer(graph.node(p).inputs[0]);
    }
    if (p != kNoNode && stopped.empty()) {
      const Node &scale = graph.node(p);
      ValueId x = scaledOperand(view, scale);
      if (x != kNoValue && graph.type(x).shape == graph.type(scale.outputs[0]).shape)
        take(p);
      else if (scale.op == "Div" || scale.op == "Mul")
        result.reject(scale, "left out of the softmax kernel of '" + s.name + "': " +
                                 describe(scale) + " is not a scale by a splat of the rows");
    }
    if (members.size() < 2)
      return result.reject(
          s, describe(s) + " has nothing to fuse with" +
                 (stopped.empty() ? ": no scale or CausalMask before it" : ": " + stopped));
    if (formRowKernel(graph, view, members, sm, "softmax", kPassName, result))
      ++result.statistics["forward_groups"];
  }

  static void fuseBackward(Graph &graph, const FusionView &view, NodeId sg, PassResult &result) {
    ++result.match_times;
    const Node &anchor = graph.node(sg);
    if (Verdict why = checkAnchor(graph, sg); !why)
      return result.reject(anchor, why);
    const Shape &rows = graph.type(anchor.outputs[0]).shape;
    std::vector<NodeId> members{sg};
    std::unordered_set<NodeId> inside{sg}, tried{sg};
    std::priority_queue<NodeId, std::vector<NodeId>, std::greater<>> queue;
    auto pushNeighbours = [&](NodeId n) {
      for (ValueId v : graph.node(n).inputs)
        if (NodeId p = view.producer(v); p != kNoNode && tried.insert(p).second)
          queue.push(p);
      for (ValueId v : graph.node(n).outputs)
        for (NodeId u : view.users(v))
          if (tried.insert(u).second)
            queue.push(u);
    };
    // A vector op computing exactly these rows from these rows and splats.
    auto onRows = [&](const Node &n) {
      const ops::RegisteredOp *reg = ops::opsOf(graph).find(n.op);
      if (!reg || reg->def.kind > ops::OpKind::Broadcast || n.outputs.size() != 1 ||
          graph.type(n.outputs[0]).shape != rows)
        return false;
      for (ValueId v : n.inputs)
        if (NodeId p = view.producer(v);
            !(p != kNoNode && inside.count(p)) && !isSplat(view, v) && graph.type(v).shape != rows)
          return false;
      return true;
    };
    pushNeighbours(sg);
    while (!queue.empty()) {
      NodeId c = queue.top();
      queue.pop();
      const Node &node = graph.node(c);
      if (node.op == "Fill" || !onRows(node))
        continue;
      if (Verdict why = checkUngrouped(graph, {c}); !why) {
        result.reject(node, "left out of the softmax_grad kernel of '" + anchor.name +
                                "': " + why.reason());
        continue;
      }
      members.push_back(c);
      if (Verdict why = checkConvex(view, members); !why) {
        members.pop_back();
        result.reject(node, "left out of the softmax_grad kernel of '" + anchor.name +
                                "': " + why.reason());
        continue;
      }
      inside.insert(c);
      pushNeighbours(c);
    }
    if (members.size() < 2)
      return result.reject(anchor, describe(anchor) +
                                       " has nothing to fuse with: no vector op on its rows");
    if (formRowKernel(graph, view, members, sg, "softmax_grad", kPassName, result))
      ++result.statistics["backward_groups"];
  }
};

} // namespace

KILN_REGISTER_PASS(SoftmaxFusionPass);

} // namespace kiln::passes
