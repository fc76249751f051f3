// The matmul fusions on whole training steps: the tiny Qwen step fused by one
// pass agrees with the unfused step on the reference interpreter (f32, f16,
// bf16 on ascend910b), the bias fold runs before FixPipe, and what the passes
// fuse in the Qwen-14B f16 training graph (built, never run).
#include <iostream>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "tests/support/pass_test_util.h"

namespace kiln::testing {
namespace {

const char *kBiasAdd = "MatMulBiasAddFusionPass";
const char *kFixPipe = "TbeMatmulFixPipeFusionPass";
const char *kElemwise = "ATbeMatmulElemwiseFusionPass";

// Every GraphFusion and UBFusion pass off except the three matmul passes.
passes::PassContext onlyMatmulPasses(const std::string &target) {
  passes::SwitchLayer layer = switchPasses({{kBiasAdd, true}, {kFixPipe, true}, {kElemwise, true}});
  layer.all[passes::PassGroup::GraphFusion] = false;
  layer.all[passes::PassGroup::UBFusion] = false;
  return contextFor(target, {layer});
}

// BiasAdd nodes reading a MatMul's result: what the bias fold should remove.
int64_t biasAddsAfterMatMul(const Graph &g) {
  int64_t n = 0;
  for (const Node &node : g.nodes()) {
    if (node.op != "BiasAdd")
      continue;
    NodeId producer = g.value(node.inputs[0]).producer;
    n += producer != kNoNode && g.node(producer).op == "MatMul";
  }
  return n;
}

int64_t countOp(const Graph &g, const std::string &op) {
  int64_t n = 0;
  for (const Node &node : g.nodes())
    n += node.op == op;
  return n;
}

class MatmulFusionTinyStep : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

TEST_P(MatmulFusionTinyStep, FusedAgreesWithUnfused) {
  const auto &[pass, dtype] = GetParam();
  TinyTrainingStep step = tinyTrainingStep(dtype);
  Graph fused = step.graph, unfused = step.graph;
  passes::PipelineReport report = runPasses(fused, onlyFusionPass("ascend910b", pass));
  runPasses(unfused, noFusion("ascend910b"));
  const passes::PassRecord *rec = report.find(pass);
  ASSERT_NE(rec, nullptr);
  EXPECT_TRUE(rec->ran);
  EXPECT_GT(rec->result.effect_times, 0);
  EXPECT_EQ(rec->result.match_times,
            countOp(step.graph, "MatMul") + countOp(step.graph, "BatchMatMul"));
  if (pass == kBiasAdd) {
    EXPECT_EQ(countOp(fused, "BiasAdd"), 0);
  }
  // Every output (loss, grad_norm, updated parameters and moments) agrees
  // within the dtype's tolerance: the fused kernels round less often (bias in
  // f32, FixPipe writing the f32 accumulator), never more.
  EXPECT_TRUE(fusedMatchesUnfused(fused, unfused, step.feed, dtype));
}

std::string caseName(const ::testing::TestParamInfo<std::tuple<std::string, DType>> &info) {
  return std::get<0>(info.param) + "_" + std::string(dtypeName(std::get<1>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(Passes, MatmulFusionTinyStep,
                         ::testing::Combine(::testing::Values(std::string(kBiasAdd),
                                                              std::string(kFixPipe),
                                                              std::string(kElemwise)),
                                            ::testing::Values(DType::F32, DType::F16, DType::BF16)),
                         caseName);

TEST(MatmulFusionInterplay, TheBiasIsFoldedBeforeFixPipeRuns) {
  TinyTrainingStep step = tinyTrainingStep(DType::F16);
  const std::string c_attn = "transformer.h.0.attn.c_attn";

  // Bias fold off: FixPipe takes the BiasAdd into the c_attn group.
  Graph alone = step.graph;
  runPasses(alone, onlyFusionPass("ascend910b", kFixPipe));
  NodeId bias_add = alone.findNode(c_attn + ".bias_add");
  ASSERT_NE(bias_add, kNoNode);
  ASSERT_NE(alone.node(bias_add).group, kNoGroup);
  EXPECT_EQ(alone.group(alone.node(bias_add).group).name, "fused." + c_attn);
  EXPECT_EQ(alone.group(alone.node(bias_add).group).formed_by, kFixPipe);

  // Bias fold on: the MatMul carries the bias when FixPipe sees it, so there
  // is no BiasAdd left for FixPipe, and it says what follows instead.
  Graph both = step.graph;
  passes::PipelineReport report = runPasses(both, onlyMatmulPasses("ascend910b"));
  EXPECT_EQ(both.findNode(c_attn + ".bias_add"), kNoNode);
  const Node &mm = both.node(both.findNode(c_attn));
  EXPECT_EQ(mm.inputs.size(), 3u);
  EXPECT_NE(mm.group == kNoGroup ? "" : both.group(mm.group).formed_by, kFixPipe);
  const passes::PassRecord *fixpipe = report.find(kFixPipe);
  ASSERT_NE(fixpipe, nullptr);
  bool explained = false;
  for (const passes::Rejection &rej : fixpipe->result.rejections)
    explained |= rej.node == c_attn && rej.reason.find("Split") != std::string::npos;
  EXPECT_TRUE(explained);
  EXPECT_TRUE(fusedMatchesUnfused(both, alone, step.feed, DType::F16));
}

TEST(MatmulFusionQwen14B, FusesInTheF16TrainingGraphOnAscend910b) {
  Qwen14bTrainingStep big = qwen14bTrainingStep(DType::F16);
  ASSERT_GT(big.graph.numNodes(), 0u);
  Graph *train = &big.graph;
  const int64_t bias_adds = biasAddsAfterMatMul(*train);

  Graph g = std::move(*train);
  passes::PipelineReport report = runPasses(g, onlyMatmulPasses("ascend910b"));
  for (const char *pass : {kBiasAdd, kFixPipe, kElemwise}) {
    const passes::PassRecord *rec = report.find(pass);
    ASSERT_NE(rec, nullptr) << pass;
    std::cout << "[ qwen-14b f16 ascend910b ] " << pass << ": match_times "
              << rec->result.match_times << ", effect_times " << rec->result.effect_times << "\n";
    ::testing::Test::RecordProperty(std::string(pass) + ".effect_times",
                                    std::to_string(rec->result.effect_times));
    EXPECT_GT(rec->result.effect_times, 0) << pass;
  }
  EXPECT_EQ(report.find(kBiasAdd)->result.effect_times, bias_adds);
}

} // namespace
} // namespace kiln::testing
