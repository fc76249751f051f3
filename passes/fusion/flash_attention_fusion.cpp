// FlashAttentionFusionPass: see flash_attention_fusion.h.
//
// The pattern, anchored at a Softmax over the last axis of a rank-4 tensor:
//   q [B,N,S,D] (-> Reshape [B,Nkv,g*S,D])                     q_groups
//   BatchMatMul(q, k [B,Nkv,S,D], transpose_b)                  scores
//     (or BatchMatMul(q, Transpose(k) swapping its last two axes))
//   (-> Reshape [B,N,S,D]) -> (Div|Mul by a splat)? -> CausalMask -> Cast?
//   Softmax -> Cast? (-> Reshape [B,Nkv,g*S,S]) -> BatchMatMul(P, v) (-> Reshape [B,N,S,D])
// Every value between q, k, v and the result must be read by the next node
// of the pattern only; anything else reading the scores or the probabilities
// keeps the attention unfused (and says which node reads them).
#include "passes/fusion/flash_attention_fusion.h"

#include <algorithm>
#include <optional>

#include "ops/attention_layout.h"
#include "ops/op_builder.h"
#include "passes/fusion/fusion_group_util.h"
#include "passes/pass_registry.h"

namespace kiln::passes {
namespace {

// The tile sizes the fused kernel uses on the chip: Br query rows against Bc
// keys, halved until the tiles fit the target's buffers.
constexpr int64_t kTileRows = 128;

struct AttentionCore {
  std::vector<NodeId> nodes; // everything the fused op replaces
  ValueId q = kNoValue, k = kNoValue, v = kNoValue;
  ValueId result = kNoValue; // [B,N,S,D] (or BSND), what the fused op's out replaces
  double scale = 1;
  ops::AttentionLayout layout = ops::AttentionLayout::BNSD;
};

std::string describe(const Node &node) { return node.op + " '" + node.name + "'"; }

// A Transpose that swaps the last two axes and keeps the others in place.
bool swapsLastTwoAxes(const Node &node) {
  if (node.op != "Transpose")
    return false;
  const std::vector<int64_t> &perm = node.attrs.getInts("perm");
  const int64_t r = static_cast<int64_t>(perm.size());
  for (int64_t a = 0; a < r; ++a)
    if (perm[a] != (a < r - 2 ? a : a == r - 2 ? r - 1 : r - 2))
      return false;
  return r >= 2;
}

// A Transpose between [B, S, N, D] and [B, N, S, D] (either way: the
// permutation is its own inverse).
bool swapsHeadsAndSequence(const Node &node) {
  return node.op == "Transpose" && node.attrs.getInts("perm") == std::vector<int64_t>{0, 2, 1, 3};
}

class Matcher {
public:
  Matcher(const Graph &g, const FusionView &view) : g_(g), view_(view) {}

  // The core around `softmax`, or why there is none.
  std::optional<AttentionCore> match(NodeId softmax, std::string &why) {
    AttentionCore core;
    const Node &sm = g_.node(softmax);
    const int64_t rank = g_.type(sm.inputs[0]).rank();
    if (rank != 4 || (sm.attrs.getInt("axis") != 3 && sm.attrs.getInt("axis") != -1))
      return fail(why, describe(sm) + " is not over the last axis of [B, N, S, S] scores");
    core.nodes.push_back(softmax);
    // Back to the scores matmul.
    bool masked = false, scaled = false;
    NodeId scores_reshape = kNoNode;
    ValueId x = sm.inputs[0];
    NodeId p = kNoNode;
    for (;;) {
      if (!onlyReadBy(x, core.nodes.back(), why))
        return std::nullopt;
      p = view_.producer(x);
      if (p == kNoNode)
        return fail(why, "no BatchMatMul (QK^T) before " + describe(sm));
      const Node &n = g_.node(p);
      if (n.op == "BatchMatMul")
        break;
      if (n.op == "CausalMask" && !masked) {
        masked = true;
      } else if ((n.op == "Div" || n.op == "Mul") && !scaled) {
        const std::optional<double> factor = splatValue(n.inputs[1]);
        if (!factor || *factor == 0)
          return fail(why, describe(n) + " does not scale by a constant");
        core.scale = n.op == "Div" ? 1.0 / *factor : *factor;
        scaled = true;
        if (view_.users(n.inputs[1]).size() == 1) // the constant goes with it
          core.nodes.push_back(view_.producer(n.inputs[1]));
      } else if (n.op == "Reshape" && scores_reshape == kNoNode) {
        scores_reshape = p;
      } else if (n.op != "Cast") {
        return fail(why, describe(n) + " lies between the scores and " + describe(sm));
      }
      core.nodes.push_back(p);
      x = n.inputs[0];
    }
    if (!masked)
      return fail(why, "the attention of " + describe(sm) + " has no causal mask");
    const Node &scores = g_.node(p);
    if (scores.attrs.getBool("transpose_a"))
      return fail(why, describe(scores) + " is not q k^T");
    core.nodes.push_back(p);
    core.k = scores.inputs[1];
    if (!scores.attrs.getBool("transpose_b")) {
      // k^T as a Transpose of k's last two axes: torch's q @ k.transpose(-2, -1), exported.
      const NodeId t = view_.producer(core.k);
      if (t == kNoNode || !swapsLastTwoAxes(g_.node(t)))
        return fail(why, describe(scores) + " is not q k^T");
      if (!onlyReadBy(core.k, p, why))
        return std::nullopt;
      core.nodes.push_back(t);
      core.k = g_.node(t).inputs[0];
    }
    core.q = scores.inputs[0];
    if (scores_reshape != kNoNode) { // grouped-query attention: q was seen grouped
      const NodeId grouped = view_.producer(core.q);
      if (grouped == kNoNode || g_.node(grouped).op != "Reshape" || !onlyReadBy(core.q, p, why))
        return fail(why, describe(scores) + " reads no grouped q");
      core.nodes.push_back(grouped);
      core.q = g_.node(grouped).inputs[0];
    }
    if (!matchContext(softmax, core, why) || !checkShapes(core, why))
      return std::nullopt;
    absorbTransposes(core);
    return core;
  }

  // BSND, CANN's input_layout for a projection's heads as they are: q, k
  // and v each a BSND tensor's Transpose that only the attention reads, and
  // the context read only by a Transpose back. The fused op then reads and
  // writes BSND and the four Transposes go with the core.
  void absorbTransposes(AttentionCore &core) const {
    std::vector<NodeId> in;
    for (ValueId x : {core.q, core.k, core.v}) {
      const NodeId t = view_.producer(x);
      if (t == kNoNode || !swapsHeadsAndSequence(g_.node(t)) || view_.isGraphOutput(x) ||
          view_.users(x).size() != 1 || std::find(in.begin(), in.end(), t) != in.end())
        return;
      in.push_back(t);
    }
    const auto &users = view_.users(core.result);
    if (users.size() != 1 || view_.isGraphOutput(core.result) ||
        !swapsHeadsAndSequence(g_.node(users[0])))
      return;
    core.q = g_.node(in[0]).inputs[0];
    core.k = g_.node(in[1]).inputs[0];
    core.v = g_.node(in[2]).inputs[0];
    core.nodes.insert(core.nodes.end(), in.begin(), in.end());
    core.nodes.push_back(users[0]);
    core.result = g_.node(users[0]).outputs[0];
    core.layout = ops::AttentionLayout::BSND;
  }

private:
  static std::optional<AttentionCore> fail(std::string &why, std::string reason) {
    why = std::move(reason);
    return std::nullopt;
  }

  // `v` is read by `reader` only.
  bool onlyReadBy(ValueId v, NodeId reader, std::string &why) const {
    const auto &users = view_.users(v);
    if (view_.isGraphOutput(v) || users.size() != 1 || users[0] != reader) {
      for (NodeId u : users)
        if (u != reader) {
          why = "'" + g_.valueName(v) + "' is also read by " + describe(g_.node(u));
          return false;
        }
      why = "'" + g_.valueName(v) + "' is a graph output";
      return false;
    }
    return true;
  }

  std::optional<double> splatValue(ValueId v) const {
    const NodeId p = view_.producer(v);
    if (p == kNoNode || g_.node(p).op != "Fill")
      return std::nullopt;
    return g_.node(p).attrs.getFloat("value");
  }

  // Forward from the softmax: Cast? -> Reshape? -> BatchMatMul(P, v) -> Reshape?.
  bool matchContext(NodeId softmax, AttentionCore &core, std::string &why) {
    ValueId x = g_.node(softmax).outputs[0];
    for (;;) {
      const auto &users = view_.users(x);
      if (users.size() != 1 || view_.isGraphOutput(x)) {
        why = "the probabilities '" + g_.valueName(x) + "' are read by " +
              std::to_string(users.size()) + " nodes";
        return false;
      }
      const Node &n = g_.node(users[0]);
      core.nodes.push_back(users[0]);
      if (n.op == "BatchMatMul") {
        if (n.inputs[0] != x || n.attrs.getBool("transpose_a") || n.attrs.getBool("transpose_b")) {
          why = describe(n) + " is not P v";
          return false;
        }
        core.v = n.inputs[1];
        core.result = n.outputs[0];
        break;
      }
      if (n.op != "Cast" && n.op != "Reshape") {
        why = describe(n) + " lies between the softmax and P v";
        return false;
      }
      x = n.outputs[0];
    }
    // Grouped-query attention: the context back to [B,N,S,D].
    const auto &users = view_.users(core.result);
    if (g_.type(core.result).shape != g_.type(core.q).shape && users.size() == 1 &&
        !view_.isGraphOutput(core.result) && g_.node(users[0]).op == "Reshape") {
      core.nodes.push_back(users[0]);
      core.result = g_.node(users[0]).outputs[0];
    }
    return true;
  }

  bool checkShapes(const AttentionCore &core, std::string &why) const {
    const TensorType &q = g_.type(core.q), &k = g_.type(core.k), &v = g_.type(core.v);
    const TensorType &out = g_.type(core.result);
    const bool ok = q.rank() == 4 && k == v && k.rank() == 4 && q.dtype == k.dtype && out == q &&
                    k.shape[0] == q.shape[0] && k.shape[2] == q.shape[2] &&
                    k.shape[3] == q.shape[3] && q.shape[1] % k.shape[1] == 0;
    if (!ok)
      why = "q " + typeToString(q) + ", k " + typeToString(k) + ", v " + typeToString(v) +
            " and the context " + typeToString(out) +
            " are not [B, N, S, D] against [B, Nkv, S, D]";
    return ok;
  }

  const Graph &g_;
  const FusionView &view_;
};

// The fused kernel's tiles on the chip: Br query rows of q and Bc rows of k
// (compute dtype) in L0A and L0B, the Br x Bc f32 scores in L0C, and in the
// UB the probabilities, the output accumulator (Br x D, f32) and the row
// statistics. Br = Bc, halved from 128 until everything fits.

std::string fusedName(const Graph &g, const Node &softmax) {
  const size_t dot = softmax.name.rfind('.');
  std::string base = (dot == std::string::npos ? std::string() : softmax.name.substr(0, dot + 1)) +
                     "flash_attention";
  std::string name = base;
  for (int i = 1; g.findNode(name) != kNoNode; ++i)
    name = base + "_" + std::to_string(i);
  return name;
}

class FlashAttentionFusionPass final : public Pass {
public:
  const PassInfo &info() const override {
    static const PassInfo info{
        .name = kFlashAttentionPassName,
        .group = PassGroup::GraphFusion,
        .default_on = true,
        .may_disable = true,
        .summary = "Fuses each causal attention (scores, scale, mask, softmax, P v; grouped "
                   "key/value heads too) into one FlashAttentionScore",
        .description =
            "Anchored at each Softmax over the last axis: walks back through Cast, CausalMask, "
            "a constant scale and grouped-query Reshapes to the BatchMatMul computing q k^T (k "
            "transposed by the matmul or by a Transpose of its last two axes, as exported "
            "models write it), and "
            "forward through Cast and Reshape to the BatchMatMul with v; the whole core becomes "
            "one FlashAttentionScore (CANN's op: scores, row max and sum in f32, the "
            "probabilities in the compute dtype for P v; only the per-row statistics are kept "
            "for the backward). Where q, k and v are Transposes of [B, S, N, D] heads read by "
            "the attention alone and the context goes back by a Transpose, the op takes "
            "input_layout BSND and the four Transposes go with the core (statistic bsnd). Runs "
            "on the forward graph before autodiff, so the backward is "
            "FlashAttentionScoreGrad, which recomputes the probabilities tile by tile "
            "(FlashAttention-2). Applies where the target ships the fused op (ascend910b; "
            "CANN has it for the Atlas A2 series only) and the tiles fit its buffers. Leaves an "
            "attention alone when another node reads its scores or probabilities. On by "
            "default where it applies, as MindFormers' 910B recipes set use_flash_attention; "
            "--disable-pass keeps a job's attention unfused (the S x S scores materialised, "
            "AttentionFp32CastPass then handles their precision)."};
    return info;
  }

  Verdict appliesTo(const PassContext &ctx) const override {
    if (!ctx.target().hasFusedOp(kFlashAttentionOp))
      return Verdict::forbid(ctx.target().name +
                             " has no FlashAttentionScore (CANN ships the fused attention for "
                             "the Atlas A2 series, ascend910b, only)");
    return Verdict::allow();
  }

  Expected<PassResult> run(Graph &graph, const PassContext &ctx) const override {
    PassResult result;
    const FusionView view(graph);
    Matcher matcher(graph, view);
    std::vector<AttentionCore> cores;
    std::vector<NodeId> anchors;
    for (NodeId id = 0; id < static_cast<NodeId>(graph.numNodes()); ++id) {
      if (graph.isErased(id))
        continue;
      const Node &node = graph.node(id);
      // Attention fused before autodiff is reported here.
      if (node.op == kFlashAttentionOp && node.provenance.pass == kFlashAttentionPassName) {
        ++result.match_times;
        ++result.effect_times;
        ++result.statistics["fused_before_autodiff"];
        continue;
      }
      if (node.op != "Softmax")
        continue;
      ++result.match_times;
      std::string why;
      std::optional<AttentionCore> core = matcher.match(id, why);
      if (!core) {
        result.reject(node, why);
        continue;
      }
      if (Verdict fit = flashAttentionTilesFit(ctx.target(), graph.type(core->q), core->layout);
          !fit) {
        result.reject(node, fit);
        continue;
      }
      if (core->layout == ops::AttentionLayout::BSND)
        ++result.statistics["bsnd"];
      cores.push_back(std::move(*core));
      anchors.push_back(id);
    }
    for (size_t c = 0; c < cores.size(); ++c)
      fuse(graph, cores[c], graph.node(anchors[c]));
    result.effect_times += static_cast<int64_t>(cores.size());
    return result;
  }

private:
  static void fuse(Graph &graph, const AttentionCore &core, const Node &softmax) {
    std::vector<std::string> origins;
    for (NodeId n : core.nodes)
      origins.push_back(graph.node(n).name);
    ops::OpBuilder b(graph);
    b.setProvenance(Provenance{kFlashAttentionPassName, origins});
    const std::string name = fusedName(graph, softmax);
    std::vector<ValueId> outs =
        b.createMulti(kFlashAttentionOp, name, {core.q, core.k, core.v},
                      {{"scale", core.scale},
                       {"causal", true},
                       {"input_layout", std::string(ops::attentionLayoutName(core.layout))}});
    graph.replaceAllUses(core.result, outs[0]);
    for (NodeId n : core.nodes)
      graph.eraseNode(n);
  }
};

KILN_REGISTER_PASS(FlashAttentionFusionPass);

} // namespace

Verdict flashAttentionTilesFit(const target::Target &t, const TensorType &q,
                               ops::AttentionLayout layout) {
  const ops::AttentionShape a = ops::attentionShapeOf(q.shape, layout);
  const int64_t d = a.D, bytes = static_cast<int64_t>(dtypeSize(q.dtype));
  for (int64_t br = std::min<int64_t>(kTileRows, std::max<int64_t>(a.S, 16)); br >= 16; br /= 2) {
    const int64_t l0a = br * d * bytes, l0c = br * br * 4;
    const int64_t ub = br * br * 4 + br * d * 4 + 2 * br * 4;
    if (l0a <= t.memory.l0a_bytes && l0a <= t.memory.l0b_bytes && l0c <= t.memory.l0c_bytes &&
        ub <= t.memory.ub_bytes)
      return Verdict::allow();
  }
  return Verdict::forbid("head size " + std::to_string(d) + " does not fit " + t.name +
                         "'s buffers even with 16-row tiles: 16 x " + std::to_string(d) + " x " +
                         std::to_string(bytes) + " bytes of q against L0A " +
                         std::to_string(t.memory.l0a_bytes) + ", and 16 x (16 + " +
                         std::to_string(d) + ") f32 in the UB against " +
                         std::to_string(t.memory.ub_bytes));
}

bool fusesAttention(const PassContext &ctx) {
  const Pass *pass = PassRegistry::builtin().find(kFlashAttentionPassName);
  return pass && ctx.willRun(*pass);
}

Expected<PassResult> fuseAttentionBeforeAutodiff(Graph &forward, const PassContext &ctx) {
  if (!fusesAttention(ctx))
    return PassResult{};
  const Pass *pass = PassRegistry::builtin().find(kFlashAttentionPassName);
  KILN_ASSIGN_OR_RETURN(PassResult result, pass->run(forward, ctx));
  KILN_RETURN_IF_ERROR(forward.compact());
  return result;
}

} // namespace kiln::passes
