#include "executable/kernel_cost.h"

#include <algorithm>
#include <optional>

namespace kiln::executable {

namespace {

double elements(const Graph &graph, ValueId v) {
  return static_cast<double>(numElements(graph.type(v).shape));
}

double bytes(const Graph &graph, ValueId v) {
  return elements(graph, v) * static_cast<double>(dtypeSize(graph.type(v).dtype));
}

bool isMatMul(const Node &node) { return node.op == "MatMul" || node.op == "BatchMatMul"; }

// Fused attention's work: the matmuls it runs on the cube (q k^T and P v
// forward; the backward recomputes q k^T and runs dout v^T, dq, dk and dv)
// over the score pairs it computes (half of S x S when causal), and about
// five vector operations a score (scale, mask, exp, max and sum; the
// backward's product with dP) per pass.
struct AttentionWork {
  double matmul = 0, vector = 0;
};

std::optional<AttentionWork> attentionWork(const Graph &graph, const Node &node) {
  const bool forward = node.op == "FlashAttentionScore";
  if (!forward && node.op != "FlashAttentionScoreGrad")
    return std::nullopt;
  // The row statistics are [B, N, S] in either layout; q's last axis is D.
  const Shape &q = graph.type(node.inputs[0]).shape;
  const Shape &stats = graph.type(forward ? node.outputs[1] : node.inputs[5]).shape;
  if (q.size() != 4 || stats.size() != 3)
    return std::nullopt;
  const double pairs = static_cast<double>(stats[0] * stats[1]) * static_cast<double>(stats[2]) *
                       static_cast<double>(stats[2]) * (node.attrs.getBool("causal") ? 0.5 : 1.0);
  const double d = static_cast<double>(q[3]);
  return forward ? AttentionWork{2 * 2 * pairs * d, 5 * pairs}
                 : AttentionWork{5 * 2 * pairs * d, 10 * pairs};
}

} // namespace

NodeWork nodeWork(const Graph &graph, const Node &node) {
  if (node.outputs.empty())
    return {};
  const double out = elements(graph, node.outputs[0]);
  if (const std::optional<AttentionWork> w = attentionWork(graph, node))
    return {w->matmul, w->vector};
  if (isMatMul(node) && !node.inputs.empty()) {
    // Each output element is a dot product over the contracted extent of A.
    const Shape &a = graph.type(node.inputs[0]).shape;
    if (a.size() < 2)
      return {out, 0};
    const bool ta = node.attrs.has("transpose_a") && node.attrs.getBool("transpose_a");
    const int64_t k = ta ? a[a.size() - 2] : a.back();
    return {2.0 * out * static_cast<double>(k), 0};
  }
  double in = 0;
  for (ValueId v : node.inputs)
    in = std::max(in, elements(graph, v));
  return {0, std::max(out, in)};
}

KernelCost kernelCost(const Graph &graph, const KernelSpec &kernel) {
  KernelCost cost;
  for (NodeId id : kernel.members) {
    const Node &node = graph.node(id);
    const NodeWork w = nodeWork(graph, node);
    cost.flops += w.total();
    cost.matmul_flops += w.cube;
  }
  for (ValueId v : kernel.inputs)
    cost.input_bytes += bytes(graph, v);
  for (ValueId v : kernel.outputs)
    cost.output_bytes += bytes(graph, v);
  return cost;
}

} // namespace kiln::executable
