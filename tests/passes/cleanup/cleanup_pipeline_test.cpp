// The four cleanup passes together on real training steps: the tiny Qwen
// step computes bit for bit what it did before, with fewer nodes; a second
// run finds nothing left to do; the Qwen-14B step shrinks too (its sizes and
// pass times are printed, not asserted).
#include <bit>
#include <chrono>
#include <cstdio>
#include <set>
#include <tuple>

#include <gtest/gtest.h>

#include "compiler/autodiff/training_step.h"
#include "compiler/frontend/model_loader.h"
#include "passes/cleanup/common_subexpression_elimination.h"
#include "passes/cleanup/constant_folding.h"
#include "passes/cleanup/dead_code_elimination.h"
#include "passes/cleanup/reshape_transpose_folding.h"
#include "tests/passes/cleanup/cleanup_test_util.h"

namespace kiln::testing {
namespace {

// No two Fills with the same dtype, shape and value bits are left.
bool fillsAreUnique(const Graph &g) {
  std::set<std::tuple<DType, Shape, uint64_t>> seen;
  for (const Node &n : g.nodes())
    if (n.op == "Fill" && !seen.insert({n.attrs.getDType("dtype"), n.attrs.getInts("shape"),
                                        std::bit_cast<uint64_t>(n.attrs.getFloat("value"))})
                               .second)
      return false;
  return true;
}

void checkTinyStep(DType dtype) {
  TinyTrainingStep step = tinyTrainingStep(dtype);
  Graph cleaned = step.graph;
  passes::PipelineReport report = runPasses(cleaned, onlyCleanup(kCleanupPasses));
  for (const std::string &pass : kCleanupPasses) {
    ASSERT_NE(report.find(pass), nullptr) << pass;
    EXPECT_TRUE(report.find(pass)->ran) << pass;
  }
  EXPECT_LT(cleaned.numNodes(), step.graph.numNodes());
  std::printf("[ measure  ] tiny Qwen %s training step: %zu -> %zu nodes\n",
              std::string(dtypeName(dtype)).c_str(), step.graph.numNodes(), cleaned.numNodes());
  // Every rewrite is exact (identical computations merged, data movement
  // folded, dead nodes dropped), so the results agree bit for bit.
  EXPECT_TRUE(sameResults(step.graph, cleaned, step.feed)) << dtypeName(dtype);

  // The per-layer copies of eps merge into the first layer's.
  EXPECT_NE(cleaned.findNode("transformer.h.0.ln_1.eps"), kNoNode);
  EXPECT_EQ(cleaned.findNode("transformer.h.1.ln_1.eps"), kNoNode);
  EXPECT_EQ(cleaned.findNode("transformer.ln_f.eps"), kNoNode);
  EXPECT_TRUE(fillsAreUnique(cleaned));
  EXPECT_FALSE(fillsAreUnique(step.graph));
  EXPECT_GT(report.find("CommonSubexpressionEliminationPass")->result.effect_times, 0);
  EXPECT_GT(report.find("ReshapeTransposeFoldingPass")->result.effect_times, 0);
  EXPECT_GT(report.find("DeadCodeEliminationPass")->result.effect_times, 0);

  // A fixed point: running the cleanup again changes nothing.
  const std::string text = textOf(cleaned);
  passes::PipelineReport again = runPasses(cleaned, onlyCleanup(kCleanupPasses));
  for (const std::string &pass : kCleanupPasses)
    EXPECT_EQ(again.find(pass)->result.effect_times, 0) << pass;
  EXPECT_EQ(textOf(cleaned), text);
}

TEST(CleanupPipeline, TinyQwenTrainingStepF32IsExactAndSmaller) { checkTinyStep(DType::F32); }

TEST(CleanupPipeline, TinyQwenTrainingStepF16IsExactAndSmaller) { checkTinyStep(DType::F16); }

TEST(CleanupPipeline, FusionSwitchedOffAsInTheJobStillRunsTheCleanup) {
  // The context a job gets with fusion off: cleanup passes at their defaults.
  TinyTrainingStep step = tinyTrainingStep(DType::F32);
  Graph cleaned = step.graph;
  passes::PipelineReport report =
      runPasses(cleaned, contextFor("ascend910b", {switchAll(passes::PassGroup::GraphFusion, false),
                                                   switchAll(passes::PassGroup::UBFusion, false)}));
  for (const std::string &pass : kCleanupPasses)
    EXPECT_TRUE(report.find(pass)->ran) << pass;
  EXPECT_LT(cleaned.numNodes(), step.graph.numNodes());
  EXPECT_TRUE(fusedMatchesUnfused(cleaned, step.graph, step.feed, DType::F32));
}

TEST(CleanupPipeline, Qwen14BTrainingStepShrinks) {
  for (DType dtype : {DType::F32, DType::BF16}) {
    frontend::ModelOptions options;
    options.batch = 1;
    options.seq = 2048;
    options.dtype = dtype;
    auto t0 = std::chrono::steady_clock::now();
    auto model = frontend::loadModel(
        std::string(KILN_SOURCE_DIR) + "/examples/qwen-14b/config.json", options);
    ASSERT_TRUE(model) << model.message();
    auto train = autodiff::buildTrainingStep(model->graph, autodiff::TrainingStepOptions{});
    ASSERT_TRUE(train) << train.message();
    const double build_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    Graph graph = std::move(*train);
    const size_t before = graph.numNodes();

    // The drivers alone, without the manager's compact and verify after each.
    Graph copy = graph;
    auto d0 = std::chrono::steady_clock::now();
    passes::foldConstants(copy, passes::ConstantFoldingOptions{});
    passes::foldReshapesAndTransposes(copy);
    passes::eliminateCommonSubexpressions(copy);
    passes::eliminateDeadCode(copy);
    const double drivers_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - d0).count();
    ASSERT_TRUE(copy.compact().isOk());

    passes::PipelineReport report = runPasses(graph, onlyCleanup(kCleanupPasses));
    EXPECT_LT(graph.numNodes(), before);
    double total_ms = 0;
    std::printf("[ measure  ] Qwen-14B %s training step: %zu -> %zu nodes (build %.1f ms)\n",
                std::string(dtypeName(dtype)).c_str(), before, graph.numNodes(), build_ms);
    for (const std::string &pass : kCleanupPasses) {
      const passes::PassRecord *rec = report.find(pass);
      ASSERT_NE(rec, nullptr);
      EXPECT_TRUE(rec->ran);
      total_ms += rec->time_ms;
      std::printf("[ measure  ]   %-36s effect_times %5lld  %.2f ms\n", pass.c_str(),
                  static_cast<long long>(rec->result.effect_times), rec->time_ms);
      for (const auto &[key, value] : rec->result.statistics)
        std::printf("[ measure  ]     %s %lld\n", key.c_str(), static_cast<long long>(value));
    }
    std::printf("[ measure  ]   total %.2f ms in the manager, %.2f ms in the drivers alone\n",
                total_ms, drivers_ms);
    EXPECT_EQ(copy.numNodes(), graph.numNodes());
  }
}

} // namespace
} // namespace kiln::testing
