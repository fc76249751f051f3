// RecomputePass on the tiny Qwen training step (forward, backward, AdamW):
// the copies compute exactly what the originals did, `full` copies every
// layer and `selective` only the attention cores, the copies come last layer
// first, the layer list limits it, and a graph without a backward is left
// alone.
#include <gtest/gtest.h>

#include "ops/op_verifier.h"
#include "passes/cleanup/dead_code_elimination.h"
#include "passes/memory/recompute_pass.h"
#include "tests/passes/cleanup/cleanup_test_util.h"

namespace kiln::testing {
namespace {

using passes::RecomputeMode;
using passes::RecomputeSettings;

struct Recomputed {
  Graph graph;
  passes::PassResult result;
};

Recomputed recompute(const Graph &original, RecomputeSettings settings) {
  Recomputed r{original, {}};
  r.result = passes::recomputeActivations(r.graph, settings);
  Status compacted = r.graph.compact();
  EXPECT_TRUE(compacted) << compacted.message();
  Status verified = ops::verifyGraph(r.graph);
  EXPECT_TRUE(verified) << verified.message();
  return r;
}

// Positions of the copies of layer `layer`'s nodes in the graph's order.
std::vector<size_t> copiesOf(const Graph &g, int64_t layer) {
  const std::string prefix = "recompute.transformer.h." + std::to_string(layer) + ".";
  std::vector<size_t> at;
  for (size_t i = 0; i < g.numNodes(); ++i)
    if (g.node(static_cast<NodeId>(i)).name.starts_with(prefix))
      at.push_back(i);
  return at;
}

bool hasCopy(const Graph &g, const std::string &node) {
  return g.findNode("recompute." + node) != kNoNode;
}

TEST(RecomputePass, FullCopiesEveryLayerAndChangesNoBit) {
  TinyTrainingStep step = tinyTrainingStep(DType::F32);
  Recomputed r = recompute(step.graph, {RecomputeMode::Full, {}});
  const int64_t layers = tinyQwenLayers();
  EXPECT_EQ(r.result.effect_times, layers);
  EXPECT_GT(r.result.statistics.at("recomputed_nodes"), 10 * layers);
  EXPECT_TRUE(hasCopy(r.graph, "transformer.h.0.attn.softmax"));
  EXPECT_TRUE(hasCopy(r.graph, "transformer.h.1.mlp.act"));
  EXPECT_FALSE(hasCopy(r.graph, "transformer.ln_f.mul_weight")) << "only the layers";
  // Last layer first: each layer's copies come after the next layer's.
  for (int64_t l = 0; l + 1 < layers; ++l) {
    ASSERT_FALSE(copiesOf(r.graph, l).empty()) << l;
    EXPECT_GT(copiesOf(r.graph, l).front(), copiesOf(r.graph, l + 1).back()) << l;
  }
  EXPECT_TRUE(sameResults(step.graph, r.graph, step.feed));
}

TEST(RecomputePass, SelectiveCopiesOnlyTheAttentionCore) {
  TinyTrainingStep step = tinyTrainingStep(DType::F16);
  Recomputed r = recompute(step.graph, {RecomputeMode::Selective, {}});
  EXPECT_EQ(r.result.effect_times, tinyQwenLayers());
  EXPECT_TRUE(hasCopy(r.graph, "transformer.h.0.attn.softmax"));
  EXPECT_TRUE(hasCopy(r.graph, "transformer.h.0.attn.scores"));
  EXPECT_FALSE(hasCopy(r.graph, "transformer.h.0.attn.context")) << "reads the probabilities";
  EXPECT_FALSE(hasCopy(r.graph, "transformer.h.0.attn.c_attn"));
  EXPECT_FALSE(hasCopy(r.graph, "transformer.h.0.mlp.act"));
  EXPECT_TRUE(sameResults(step.graph, r.graph, step.feed));
}

TEST(RecomputePass, TheLayerListLimitsItAndNoneOrNoBackwardChangeNothing) {
  TinyTrainingStep step = tinyTrainingStep(DType::F32);
  Recomputed one = recompute(step.graph, {RecomputeMode::Full, {1}});
  EXPECT_EQ(one.result.effect_times, 1);
  EXPECT_TRUE(copiesOf(one.graph, 0).empty());
  EXPECT_FALSE(copiesOf(one.graph, 1).empty());
  EXPECT_TRUE(sameResults(step.graph, one.graph, step.feed));

  Recomputed none = recompute(step.graph, {RecomputeMode::None, {}});
  EXPECT_EQ(textOf(none.graph), textOf(step.graph));

  // The forward alone: nothing lives on to a backward.
  Graph forward = step.graph;
  auto &outputs = forward.mutableOutputs();
  std::erase_if(outputs, [](const GraphOutput &o) { return o.name != "loss"; });
  passes::eliminateDeadCode(forward);
  ASSERT_TRUE(forward.compact());
  passes::PassResult result = passes::recomputeActivations(forward, {RecomputeMode::Full, {}});
  EXPECT_EQ(result.effect_times, 0);
  EXPECT_EQ(result.match_times, 0);
}

} // namespace
} // namespace kiln::testing
