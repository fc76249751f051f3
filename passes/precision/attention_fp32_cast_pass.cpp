// AttentionFp32CastPass: the standard fix for fp16 overflow in attention.
// In every attention, forward and backward, QK^T takes low-precision inputs
// and stores f32 (fp32_out: the cube accumulates in f32 anyway), scale, mask
// and softmax run in f32, and the probabilities are cast to the low dtype
// before the PV matmul; SoftmaxGrad and the path from it to the dQ/dK
// matmuls run in f32, and the matmul producing dP stores f32.
#include <set>

#include "passes/fusion/fusion_group_util.h"
#include "passes/pass.h"
#include "passes/pass_context.h"
#include "passes/pass_registry.h"
#include "passes/precision/retype.h"
#include "passes/precision/setting_matches.h"

namespace kiln::passes {
namespace {

constexpr const char *kPassName = kAttentionFp32CastPassName;
constexpr const char *kWhy = "attention fp32";

// Ops allowed between the scores matmul and the softmax, and on the
// gradient's way from SoftmaxGrad to the dQ/dK matmuls. Reshape is grouped-
// query attention's: its scores leave the matmul as [B, kv_heads,
// group * S, S] and are seen as [B, heads, S, S].
bool attentionVectorOp(const std::string &op) {
  return op == "Div" || op == "Mul" || op == "Add" || op == "CausalMask" || op == "Cast" ||
         op == "Reshape";
}

class AttentionFp32CastPass : public Pass {
public:
  const PassInfo &info() const override {
    static const PassInfo info{
        .name = kPassName,
        .group = PassGroup::Precision,
        .default_on = true,
        .may_disable = true,
        .summary = "Computes attention scores, scale, mask and softmax (and their gradients) in "
                   "f32 around low-precision matmuls",
        .description =
            "Anchored at each Softmax over the last axis: walks back through Div/Mul/Add/"
            "CausalMask/Cast/Reshape to the BatchMatMul computing QK^T, which keeps its "
            "low-precision "
            "inputs and stores f32 (fp32_out); the scale, mask and softmax compute in f32; the "
            "BatchMatMuls reading the probabilities (PV, and dV in the backward) take them cast "
            "to the low dtype. Backward: the SoftmaxGrad of that softmax runs in f32, the "
            "BatchMatMul producing its incoming gradient stores f32, and the vector ops from it "
            "to the dQ/dK BatchMatMuls run in f32 (those matmuls take low-precision inputs). "
            "Inserted casts are Cast nodes named after the value they cast "
            "(transformer.h.3.attn.softmax.to_f16). An attention already in f32 is left alone. "
            "The option layers (--attention-fp32-layers, precision.attention_fp32_layers in the "
            "job) limits it to chosen layers.",
        .options = {{.name = "layers",
                     .type = PassOptionType::IntSet,
                     .default_value = "",
                     .description = "the transformer layers whose attention it rewrites "
                                    "(empty: every layer)"}}};
    return info;
  }

  Expected<PassResult> run(Graph &graph, const PassContext &ctx) const override {
    PassResult result;
    const FusionView view(graph);
    RetypePlan plan(graph.numNodes());
    const std::set<int64_t> layers = ctx.options(*this).getInts("layers");
    for (NodeId id = 0; id < static_cast<NodeId>(graph.numNodes()); ++id) {
      const Node &softmax = graph.node(id);
      if (softmax.op == "FlashAttentionScore") { // says which pass handled the layer
        result.reject(softmax, "fused by FlashAttentionFusionPass: the scores and the softmax "
                               "are f32 inside the kernel");
        continue;
      }
      if (softmax.op != "Softmax")
        continue;
      ++result.match_times;
      if (!layers.empty() && !layers.count(modelLayerOf(softmax.name))) {
        result.reject(softmax, "layer " + std::to_string(modelLayerOf(softmax.name)) +
                                   " is not in its layers option (--attention-fp32-layers)");
        continue;
      }
      // Back to the scores matmul.
      std::vector<NodeId> prologue;
      NodeId scores = view.producer(softmax.inputs[0]);
      while (scores != kNoNode && attentionVectorOp(graph.node(scores).op)) {
        prologue.push_back(scores);
        scores = view.producer(graph.node(scores).inputs[0]);
      }
      if (scores == kNoNode || graph.node(scores).op != "BatchMatMul") {
        result.reject(softmax,
                      "no BatchMatMul (QK^T) before it through Div/Mul/Add/CausalMask/Reshape");
        continue;
      }
      const DType low = graph.type(graph.node(scores).inputs[0]).dtype;
      if (low == DType::F32) {
        result.reject(softmax, "attention already computes in f32 (QK^T '" +
                                   graph.node(scores).name + "' has f32 inputs)");
        continue;
      }
      plan[scores] = {low, AttrMap{{"fp32_out", true}}, kWhy};
      for (NodeId n : prologue)
        if (graph.node(n).op != "Cast")
          plan[n] = {DType::F32, {}, kWhy};
      plan[id] = {DType::F32, {}, kWhy};
      for (NodeId u : view.users(softmax.outputs[0])) {
        const Node &user = graph.node(u);
        if (user.op == "BatchMatMul")
          plan[u] = {low, {}, kWhy};
        else if (user.op == "SoftmaxGrad")
          planBackward(graph, view, u, low, plan);
      }
      ++result.effect_times;
    }
    KILN_ASSIGN_OR_RETURN(result.dtype_decisions, applyRetype(graph, plan, kPassName));
    return result;
  }

private:
  static void planBackward(const Graph &graph, const FusionView &view, NodeId grad, DType low,
                           RetypePlan &plan) {
    plan[grad] = {DType::F32, {}, kWhy};
    // The gradient of the probabilities comes from a matmul (dP = dO V^T).
    for (ValueId in : graph.node(grad).inputs) {
      NodeId p = view.producer(in);
      if (p != kNoNode && graph.node(p).op == "BatchMatMul" && !plan[p].dtype)
        plan[p] = {low, AttrMap{{"fp32_out", true}}, kWhy};
    }
    // Forward to the dQ/dK matmuls through the scale's and mask's gradients.
    std::vector<NodeId> stack{grad};
    std::set<NodeId> seen{grad};
    while (!stack.empty()) {
      NodeId n = stack.back();
      stack.pop_back();
      for (NodeId u : view.users(graph.node(n).outputs[0])) {
        if (!seen.insert(u).second)
          continue;
        const std::string &op = graph.node(u).op;
        if (op == "BatchMatMul") {
          plan[u] = {low, {}, kWhy};
        } else if (attentionVectorOp(op)) {
          if (op != "Cast")
            plan[u] = {DType::F32, {}, kWhy};
          stack.push_back(u);
        }
      }
    }
  }
};

KILN_REGISTER_PASS(AttentionFp32CastPass);

} // namespace
} // namespace kiln::passes
