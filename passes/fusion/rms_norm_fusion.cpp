// RmsNormFusionPass: RMSNorm forward as one "rms_norm" kernel and the
// gradient autodiff made for it as one "rms_norm_grad" kernel, both computing
// in f32 like TBE's norm kernels.
//
// Forward, anchored at the ReduceMean:
//   a = Cast(x)?;  y = Cast?(a * Rsqrt(ReduceMean(a * a, last axis, keepdims) + eps)) * w
// Backward, anchored at the RsqrtGrad of that Rsqrt. Let g be the gradient of
// the forward's result (the input of Mul(g, w)). The kernel is every node on
// a path from g to the first node where the contribution through the rsqrt
// (RsqrtGrad -> scale -> BroadcastTo -> Mul(., a)) meets the direct one
// (Mul(dy, rsqrt)) — the sum of a's gradient, plus a Cast after it — and to
// the weight's gradient (Mul(g, normalised) summed over the rows). A set of
// all nodes between two points is convex by construction; its members must
// be vector ops, the row sum feeding the RsqrtGrad or the weight gradient's
// sum over the rows.
#include <algorithm>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "ops/op_registry.h"
#include "passes/fusion/fusion_group_util.h"
#include "passes/pass_context.h"
#include "passes/pass_registry.h"

namespace kiln::passes {
namespace {

constexpr const char *kPassName = "RmsNormFusionPass";

std::string describe(const Node &node) { return node.op + " '" + node.name + "'"; }

// The node producing `v` if it runs `op`, else kNoNode.
NodeId producerOf(const FusionView &view, ValueId v, std::string_view op) {
  NodeId p = view.producer(v);
  return p != kNoNode && view.graph().node(p).op == op ? p : kNoNode;
}

// The operand of binary `node` other than `v`, or kNoValue when `v` is not one.
ValueId otherOperand(const Node &node, ValueId v) {
  if (node.inputs.size() != 2)
    return kNoValue;
  if (node.inputs[0] == v)
    return node.inputs[1];
  return node.inputs[1] == v ? node.inputs[0] : kNoValue;
}

// The first user of `v` running `op` whose other operand satisfies `pred`.
template <typename Pred>
NodeId userOf(const FusionView &view, ValueId v, std::string_view op, Pred pred) {
  for (NodeId u : view.users(v)) {
    const Node &n = view.graph().node(u);
    if (n.op == op && otherOperand(n, v) != kNoValue && pred(otherOperand(n, v)))
      return u;
  }
  return kNoNode;
}

bool reducesLastAxisOnly(const std::vector<int64_t> &axes, int64_t rank) {
  return axes.size() == 1 && (axes[0] == rank - 1 || axes[0] == -1);
}

// The forward pattern around one ReduceMean.
struct NormForward {
  NodeId cast_in = kNoNode; // Cast(x) -> a, when the norm widens its input
  NodeId square = kNoNode, mean = kNoNode, add_eps = kNoNode, rsqrt = kNoNode;
  NodeId normalize = kNoNode;
  NodeId cast_out = kNoNode; // Cast of the normalised rows back to x's dtype
  NodeId mul_weight = kNoNode;
  ValueId a = kNoValue, weight = kNoValue;
  ValueId normalized = kNoValue; // what the weight multiplies
  std::string rejection;         // why the match failed, or empty

  std::vector<NodeId> core() const {
    std::vector<NodeId> m{square, mean, add_eps, rsqrt, normalize, mul_weight};
    if (cast_out != kNoNode)
      m.push_back(cast_out);
    return m;
  }
};

NormForward matchForward(const FusionView &view, NodeId mean) {
  const Graph &g = view.graph();
  NormForward f;
  f.mean = mean;
  const Node &m = g.node(mean);
  auto fail = [&](std::string why) {
    f.rejection = std::move(why);
    return f;
  };
  const int64_t rank = g.type(m.inputs[0]).rank();
  const std::vector<int64_t> &axes = m.attrs.getInts("axes");
  if (!reducesLastAxisOnly(axes, rank))
    return fail(describe(m) + " reduces axes " + shapeToString(axes) + " of a rank-" +
                std::to_string(rank) + " input; RMSNorm reduces the last axis only");
  if (!m.attrs.getBool("keepdims"))
    return fail(describe(m) +
                " has keepdims=false; RMSNorm keeps the reduced axis to scale each row");
  f.square = producerOf(view, m.inputs[0], "Mul");
  if (f.square == kNoNode || g.node(f.square).inputs[0] != g.node(f.square).inputs[1])
    return fail(describe(m) + " does not average a square Mul(x, x)");
  f.a = g.node(f.square).inputs[0];
  const Shape &rows = g.type(f.a).shape;
  f.add_eps = userOf(view, m.outputs[0], "Add", [&](ValueId e) { return isSplat(view, e); });
  if (f.add_eps == kNoNode)
    return fail(describe(m) + " is not followed by Add of a splat epsilon");
  for (NodeId u : view.users(g.node(f.add_eps).outputs[0]))
    if (g.node(u).op == "Rsqrt")
      f.rsqrt = u;
  if (f.rsqrt == kNoNode)
    return fail(describe(g.node(f.add_eps)) + " (mean + eps) is not followed by Rsqrt");
  ValueId inv = g.node(f.rsqrt).outputs[0];
  f.normalize = userOf(view, inv, "Mul", [&](ValueId x) { return x == f.a; });
  if (f.normalize == kNoNode)
    return fail(describe(g.node(f.rsqrt)) + " does not scale the rows it was computed from");
  f.normalized = g.node(f.normalize).outputs[0];
  for (NodeId u : view.users(f.normalized))
    if (g.node(u).op == "Cast")
      f.cast_out = u;
  if (f.cast_out != kNoNode)
    f.normalized = g.node(f.cast_out).outputs[0];
  // The weight is the operand that is not a whole row block.
  f.mul_weight =
      userOf(view, f.normalized, "Mul", [&](ValueId w) { return g.type(w).shape != rows; });
  if (f.mul_weight == kNoNode)
    return fail("the normalised rows of " + describe(m) + " are not multiplied by a weight");
  f.weight = otherOperand(g.node(f.mul_weight), f.normalized);
  const Shape want{rows.back()};
  if (g.type(f.weight).shape != want)
    return fail("row shapes disagree: " + describe(g.node(f.mul_weight)) + " multiplies rows " +
                shapeToString(rows) + " by " + shapeToString(g.type(f.weight).shape) +
                ", not by a weight of shape " + shapeToString(want));
  f.cast_in = producerOf(view, f.a, "Cast");
  return f;
}

// Nodes on a path from a user of `from` to one of `sinks` (node order).
std::vector<NodeId> between(const FusionView &view, ValueId from,
                            const std::vector<NodeId> &sinks) {
  const Graph &g = view.graph();
  NodeId hi = *std::max_element(sinks.begin(), sinks.end());
  std::unordered_set<NodeId> down;
  std::vector<NodeId> stack(view.users(from).begin(), view.users(from).end());
  NodeId lo = hi;
  while (!stack.empty()) {
    NodeId n = stack.back();
    stack.pop_back();
    if (n > hi || !down.insert(n).second)
      continue;
    lo = std::min(lo, n);
    for (ValueId v : g.node(n).outputs)
      for (NodeId u : view.users(v))
        stack.push_back(u);
  }
  std::unordered_set<NodeId> up;
  stack = sinks;
  while (!stack.empty()) {
    NodeId n = stack.back();
    stack.pop_back();
    if (n < lo || !down.count(n) || !up.insert(n).second)
      continue;
    for (ValueId v : g.node(n).inputs)
      if (NodeId p = view.producer(v); p != kNoNode)
        stack.push_back(p);
  }
  std::vector<NodeId> members(up.begin(), up.end());
  std::sort(members.begin(), members.end());
  return members;
}

// The first node (in order) reachable from both `a` and `b`, or kNoNode.
NodeId firstCommonDescendant(const FusionView &view, NodeId a, NodeId b) {
  const Graph &g = view.graph();
  std::unordered_map<NodeId, uint8_t> reach{{a, 1}, {b, 2}};
  std::priority_queue<NodeId, std::vector<NodeId>, std::greater<>> queue;
  queue.push(a);
  queue.push(b);
  while (!queue.empty()) {
    NodeId n = queue.top();
    queue.pop();
    uint8_t bits = reach[n];
    if (bits == 3)
      return n;
    for (ValueId v : g.node(n).outputs)
      for (NodeId u : view.users(v)) {
        uint8_t &r = reach[u];
        if (r == 0)
          queue.push(u);
        r |= bits;
      }
  }
  return kNoNode;
}

// The gradient kernel around one RsqrtGrad: its members, or why there is none.
struct NormBackward {
  std::vector<NodeId> members;
  std::string rejection;
};

NormBackward matchBackward(const FusionView &view, NodeId rg) {
  const Graph &g = view.graph();
  const Node &r = g.node(rg);
  auto fail = [](std::string why) { return NormBackward{{}, std::move(why)}; };
  NodeId rsqrt = producerOf(view, r.inputs[0], "Rsqrt");
  NodeId add = rsqrt == kNoNode ? kNoNode : producerOf(view, g.node(rsqrt).inputs[0], "Add");
  NodeId mean = kNoNode;
  for (ValueId v : add == kNoNode ? std::vector<ValueId>{} : g.node(add).inputs)
    if (NodeId m = producerOf(view, v, "ReduceMean"); m != kNoNode)
      mean = m;
  const char *not_a_norm = "its y is not the Rsqrt of an RMSNorm's mean of squares plus epsilon";
  if (mean == kNoNode)
    return fail(not_a_norm);
  NormForward f = matchForward(view, mean);
  if (!f.rejection.empty())
    return fail("its forward norm does not match: " + f.rejection);
  if (f.rsqrt != rsqrt)
    return fail(not_a_norm);
  const Shape &rows = g.type(f.a).shape;
  const Shape &stats = g.type(r.inputs[0]).shape;

  // dy of the RsqrtGrad: a row sum of Mul(g32, a), g32 the gradient in f32.
  NodeId ds = view.producer(r.inputs[1]);
  const Node *sum = ds == kNoNode ? nullptr : &g.node(ds);
  const int64_t rank = static_cast<int64_t>(rows.size());
  bool row_sum =
      sum && sum->inputs.size() == 1 && g.type(sum->inputs[0]).shape == rows &&
      ((sum->op == "SumToShape" && sum->attrs.getInts("shape") == stats) ||
       (sum->op == "ReduceSum" && reducesLastAxisOnly(sum->attrs.getInts("axes"), rank) &&
        sum->attrs.getBool("keepdims")));
  if (!row_sum)
    return fail("its dy is not a row sum over the last axis with keepdims (it comes from " +
                (sum ? describe(*sum) : std::string("a graph input")) + ")");
  NodeId p = producerOf(view, sum->inputs[0], "Mul");
  ValueId g32 = p == kNoNode ? kNoValue : otherOperand(g.node(p), f.a);
  if (g32 == kNoValue)
    return fail("the row sum " + describe(*sum) + " does not read Mul(dy, x) of the norm");
  ValueId inv = r.inputs[0];
  NodeId ndx = userOf(view, g32, "Mul", [&](ValueId x) { return x == inv; });
  if (ndx == kNoNode)
    return fail("no Mul(dy, rsqrt) carries the gradient past the rsqrt");
  ValueId mdx_out = g32;
  if (NodeId c = producerOf(view, g32, "Cast"); c != kNoNode)
    mdx_out = g.node(c).inputs[0];
  NodeId mdx = producerOf(view, mdx_out, "Mul");
  ValueId grad = mdx == kNoNode ? kNoValue : otherOperand(g.node(mdx), f.weight);
  if (grad == kNoValue)
    return fail("the gradient does not come through Mul(dy, weight) of the norm's weight");

  NodeId merge = firstCommonDescendant(view, rg, ndx);
  if (merge == kNoNode)
    return fail("the gradient through the rsqrt never meets the direct one");
  std::vector<NodeId> sinks{merge};
  // The weight's gradient: Mul(g, normalised) summed over the rows.
  NodeId dgamma = kNoNode;
  if (NodeId mdy = userOf(view, grad, "Mul", [&](ValueId n) { return n == f.normalized; });
      mdy != kNoNode) {
    const std::vector<NodeId> &us = view.users(g.node(mdy).outputs[0]);
    if (us.size() == 1 && (g.node(us[0]).op == "SumToShape" || g.node(us[0]).op == "ReduceSum") &&
        g.type(g.node(us[0]).outputs[0]).numElements() == g.type(f.weight).numElements())
      sinks.push_back(dgamma = us[0]);
  }
  NormBackward b{between(view, grad, sinks), {}};
  ValueId summed = g.node(merge).outputs[0];
  if (view.users(summed).size() == 1 && !view.isGraphOutput(summed) &&
      g.node(view.users(summed)[0]).op == "Cast")
    b.members.push_back(view.users(summed)[0]);
  // Vector ops cannot take a value out of the rows without a reduction, so
  // checking the kinds keeps every member on the norm's rows.
  for (NodeId n : b.members) {
    const ops::RegisteredOp *reg = ops::opsOf(g).find(g.node(n).op);
    if (n != ds && n != dgamma && !(reg && reg->def.kind <= ops::OpKind::Broadcast))
      return fail("the gradient path runs through " + describe(g.node(n)) +
                  ", which an rms_norm_grad kernel does not hold");
  }
  return b;
}

class RmsNormFusionPass final : public Pass {
public:
  const PassInfo &info() const override {
    static const PassInfo info{
        .name = kPassName,
        .group = PassGroup::UBFusion,
        .default_on = true,
        .may_disable = true,
        .summary = "Fuses RMSNorm and its gradient into one kernel each (f32 inside)",
        .description =
            "Forward: Cast? -> Mul(x, x) -> ReduceMean(last axis, keepdims) -> Add(splat eps) -> "
            "Rsqrt -> Mul(x, rsqrt) -> Cast? -> Mul(weight of the row length) becomes one "
            "'rms_norm' kernel. Backward, anchored at the RsqrtGrad of that Rsqrt: every node "
            "between the incoming gradient and the summed gradient of the norm's input (plus a "
            "Cast after it) and the weight's gradient becomes one 'rms_norm_grad' kernel; its "
            "members must be vector ops or row sums over the last axis with keepdims, in the "
            "norm's rows. Both keep intermediates in f32, as TBE's norm kernels do. Groups must "
            "be convex and made of ungrouped nodes."};
    return info;
  }

  Expected<PassResult> run(Graph &graph, const PassContext &) const override {
    PassResult result;
    FusionView view(graph);
    for (NodeId id = 0; id < static_cast<NodeId>(graph.numNodes()); ++id) {
      const std::string &op = graph.node(id).op;
      if (op == "ReduceMean")
        fuseForward(graph, view, id, result);
      else if (op == "RsqrtGrad")
        fuseBackward(graph, view, id, result);
    }
    return result;
  }

private:
  static void fuseForward(Graph &graph, const FusionView &view, NodeId mean, PassResult &result) {
    ++result.match_times;
    NormForward f = matchForward(view, mean);
    if (!f.rejection.empty()) {
      result.reject(graph.node(mean), f.rejection);
      return;
    }
    std::vector<NodeId> members = f.core();
    if (f.cast_in != kNoNode) {
      if (Verdict why = checkUngrouped(graph, {f.cast_in}); why)
        members.push_back(f.cast_in);
      else
        result.reject(graph.node(f.cast_in), "left out of the rms_norm kernel: " + why.reason());
    }
    if (formRowKernel(graph, view, members, mean, "rms_norm", kPassName, result))
      ++result.statistics["forward_groups"];
  }

  static void fuseBackward(Graph &graph, const FusionView &view, NodeId rg, PassResult &result) {
    ++result.match_times;
    NormBackward b = matchBackward(view, rg);
    if (!b.rejection.empty())
      return result.reject(graph.node(rg), describe(graph.node(rg)) + ": " + b.rejection);
    if (formRowKernel(graph, view, b.members, rg, "rms_norm_grad", kPassName, result))
      ++result.statistics["backward_groups"];
  }
};

} // namespace

KILN_REGISTER_PASS(RmsNormFusionPass);

} // namespace kiln::passes
