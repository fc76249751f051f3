// CastEliminationPass: removes the casts that precision rewriting and model
// code leave redundant. A cast to the dtype its input already has goes; a
// cast of a cast whose first step was exact (a widening: f16/bf16 -> f32)
// becomes one cast from the original value, or nothing when it casts back to
// the original dtype. Narrowing steps are kept: they round.
#include "passes/pass.h"
#include "passes/pass_context.h"
#include "passes/pass_registry.h"

namespace kiln::passes {
namespace {

constexpr const char *kPassName = "CastEliminationPass";

// from -> to loses nothing.
bool exactWidening(DType from, DType to) {
  return from == to || (to == DType::F32 && (from == DType::F16 || from == DType::BF16));
}

class CastEliminationPass : public Pass {
public:
  const PassInfo &info() const override {
    static const PassInfo info{
        .name = kPassName,
        .group = PassGroup::Precision,
        .default_on = true,
        .may_disable = true,
        .summary = "Removes identity casts and exact cast pairs",
        .description =
            "A Cast to the dtype its input already has is removed. Cast(Cast(x, A), B) where "
            "x -> A is exact (the same dtype, or f16/bf16 widened to f32) becomes x when B is "
            "x's dtype, else Cast(x, B); an inner cast left without users is removed. A pair "
            "whose first step narrows (f32 -> f16) is kept, because it rounds."};
    return info;
  }

  Expected<PassResult> run(Graph &graph, const PassContext &) const override {
    PassResult result;
    std::vector<int64_t> uses(graph.numValues(), 0);
    for (const Node &n : graph.nodes())
      for (ValueId v : n.inputs)
        ++uses[v];
    for (const GraphOutput &out : graph.outputs())
      ++uses[out.value];
    auto release = [&](ValueId v) {
      NodeId p = graph.value(v).producer;
      if (--uses[v] == 0 && p != kNoNode && graph.node(p).op == "Cast" && !graph.isErased(p)) {
        --uses[graph.node(p).inputs[0]];
        graph.eraseNode(p);
        ++result.effect_times;
      }
    };

    for (NodeId id = 0; id < static_cast<NodeId>(graph.numNodes()); ++id) {
      if (graph.isErased(id) || graph.node(id).op != "Cast" || graph.node(id).group != kNoGroup)
        continue;
      ++result.match_times;
      const ValueId out = graph.node(id).outputs[0];
      ValueId in = graph.node(id).inputs[0];
      const DType to = graph.type(out).dtype;
      NodeId inner = graph.value(in).producer;
      if (inner != kNoNode && graph.node(inner).op == "Cast" &&
          graph.node(inner).group == kNoGroup) {
        const ValueId source = graph.node(inner).inputs[0];
        if (!exactWidening(graph.type(source).dtype, graph.type(in).dtype)) {
          result.reject(graph.node(id), "its input cast '" + graph.node(inner).name +
                                            "' narrows, so the pair rounds");
        } else {
          // Read the original value; the inner cast may become dead.
          graph.setInput(id, 0, source);
          ++uses[source];
          release(in);
          in = source;
          ++result.statistics["pairs_collapsed"];
        }
      }
      if (graph.type(in).dtype == to) {
        uses[in] += uses[out];
        graph.replaceAllUses(out, in);
        uses[out] = 0;
        --uses[in];
        graph.eraseNode(id);
        ++result.effect_times;
        ++result.statistics["identity_casts_removed"];
      }
    }
    return result;
  }
};

KILN_REGISTER_PASS(CastEliminationPass);

} // namespace
} // namespace kiln::passes
