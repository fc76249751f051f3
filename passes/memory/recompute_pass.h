// Activation recomputation (Chen et al. 2016; Megatron's and MindFormers'
// `recompute`): forward values the backward reads are computed again just
// before their backward use instead of living from the forward to it.
#pragma once

#include "ir/graph.h"
#include "passes/memory/recompute_settings.h"
#include "passes/pass.h"

namespace kiln::passes {

// The driver, callable without the pass manager. The forward is what the
// graph outputs "loss" and "logits" (the model's, kiln's frontend names
// them so) need; the rest is the backward and the update (a graph without
// either part is left alone). A layer is the forward nodes
// named "transformer.h.<i>." or "model.layers.<i>.": `full` recomputes what the layer's backward
// reads from the layer's input and weights, `selective` only the attention
// core (from the scores' BatchMatMul through the Softmax, up to the context
// BatchMatMul). The copies, named "recompute.<node>", are appended last
// layer first, so compact()'s order puts each layer's copies just before its
// backward; forward nodes nothing reads any more are erased.
PassResult recomputeActivations(Graph &graph, const RecomputeSettings &settings);

// Sequence parallelism's all-gathers done again for the backward, as
// Megatron does (Korthikanti et al. 2022, section 4.2.2): the projection
// that reads the gathered sequence needs it again for its weight's
// gradient, and keeping the rank's slice (1/t of it) until then and
// gathering it a second time costs one all-gather instead of t times the
// bytes. Each forward TensorParallelAllGather the backward reads is copied
// for the backward ("recompute.<node>", its provenance the pass's name), as
// recomputeActivations copies.
inline constexpr const char *kSequenceRegatherPassName = "SequenceRegatherPass";
PassResult regatherSequenceSlices(Graph &graph);

// The model's forward: every node the outputs "loss" and "logits" depend on.
std::vector<bool> forwardNodes(const Graph &graph);
// The decoder layer of a node or weight named "transformer.h.<i>.<...>" or
// "model.layers.<i>.<...>", or -1 (ir/layer_scope.h).
int64_t layerOf(const std::string &name);

class RecomputePass final : public Pass {
public:
  const PassInfo &info() const override;
  Verdict appliesTo(const PassContext &ctx) const override;
  Expected<PassResult> run(Graph &graph, const PassContext &ctx) const override;
};

} // namespace kiln::passes
