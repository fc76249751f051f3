// FlashAttentionFusionPass: each attention core of the model (the scores
// matmul, its scale and causal mask, the softmax, the matmul with V; with
// grouped-query attention's reshapes) becomes one FlashAttentionScore
// (ops/defs/nn.xml), CANN's fused attention.
//
// The pass rewrites the forward graph, before autodiff: the backward is then
// the fused op's own gradient, FlashAttentionScoreGrad, which recomputes the
// probabilities from the saved row statistics instead of keeping the
// B x N x S x S scores. The driver calls fuseAttentionBeforeAutodiff() on
// the model's forward; in the pass pipeline the pass fuses what is left of a
// forward graph and reports the attention it fused before autodiff.
#pragma once

#include "ir/graph.h"
#include "ops/attention_layout.h"
#include "passes/pass.h"
#include "passes/pass_context.h"
#include "support/error.h"

namespace kiln::passes {

inline constexpr const char *kFlashAttentionPassName = "FlashAttentionFusionPass";
inline constexpr const char *kFlashAttentionOp = "FlashAttentionScore";

// Whether FlashAttentionScore's tiles for queries `q` ([B, N, S, D], or
// BSND) fit the target's L0 buffers and UB: 128-row tiles halved down to
// 16 until they do, or why not, with the numbers. The pass fuses only where
// they fit; the code generator checks a fused op read from a graph file the
// same way.
Verdict flashAttentionTilesFit(const target::Target &t, const TensorType &q,
                               ops::AttentionLayout layout);

// Whether the job's attention is fused: the pass is enabled and its target
// has the fused op. The one answer the driver, the memory formula and the
// planner use.
bool fusesAttention(const PassContext &ctx);

// Runs the pass on `forward` when the job enables it and its target has the
// fused op (a disabled or inapplicable pass leaves the graph alone), then
// compacts the graph. Returns what the pass did.
Expected<PassResult> fuseAttentionBeforeAutodiff(Graph &forward, const PassContext &ctx);

} // namespace kiln::passes
