// The rules of fusion_rules/ on the tiny Qwen training step: each fires where
// the model has its pattern, and the fused step computes what the unfused
// one does.
#include <gtest/gtest.h>

#include "passes/fusion/rules/rule_loader.h"
#include "passes/fusion/rules/rule_pass.h"
#include "support/file_io.h"
#include "tests/support/pass_test_util.h"

namespace kiln::passes::rules {
namespace {

int64_t tinyQwenLayers() {
  auto config = readJsonFile(std::string(KILN_SOURCE_DIR) + "/examples/qwen-tiny/config.json");
  EXPECT_TRUE(config) << config.message();
  return config ? (*config)["num_hidden_layers"].get<int64_t>() : 0;
}

struct Expectation {
  const char *rule;
  int64_t per_layer; // where the model has the pattern
};

// SwiGLU once per MLP, rotary for the query and the key; the same backward.
const Expectation kShipped[] = {{"SwiGluFusionRule", 1},
                                {"SwiGluGradFusionRule", 1},
                                {"RotaryFusionRule", 2},
                                {"RotaryGradFusionRule", 2}};

class ShippedRules : public ::testing::TestWithParam<DType> {};

TEST_P(ShippedRules, EachRuleFiresAndKeepsTheNumbers) {
  const DType dtype = GetParam();
  auto registry = registryWithFusionRules(PassRegistry::builtin());
  ASSERT_TRUE(registry) << registry.message();
  testing::TinyTrainingStep step = testing::tinyTrainingStep(dtype);
  Graph unfused = step.graph;
  testing::runPasses(unfused, testing::noFusion("ascend910b", *registry), *registry);
  ASSERT_TRUE(unfused.groups().empty());
  const int64_t layers = tinyQwenLayers();
  ASSERT_GT(layers, 0);

  for (const Expectation &e : kShipped) {
    SCOPED_TRACE(e.rule);
    const auto *pass = dynamic_cast<const RulePass *>(registry->find(e.rule));
    ASSERT_NE(pass, nullptr);
    Graph fused = step.graph;
    PipelineReport report = testing::runPasses(
        fused, testing::onlyFusionPass("ascend910b", e.rule, *registry), *registry);
    const PassRecord *record = report.find(e.rule);
    ASSERT_NE(record, nullptr);
    ASSERT_TRUE(record->ran);
    EXPECT_EQ(record->result.effect_times, e.per_layer * layers);
    // More may match: SwiGLU's pattern also fits the backward dy * silu(w2x),
    // whose silu is in the forward group by then (a rejection with a reason).
    EXPECT_GE(record->result.match_times, record->result.effect_times);
    EXPECT_EQ(record->result.rejections.size(),
              static_cast<size_t>(record->result.match_times - record->result.effect_times));
    std::vector<std::vector<NodeId>> members = fused.groupMembers();
    ASSERT_EQ(fused.groups().size(), static_cast<size_t>(record->result.effect_times));
    for (size_t g = 0; g < fused.groups().size(); ++g) {
      EXPECT_EQ(fused.group(static_cast<GroupId>(g)).formed_by, e.rule);
      EXPECT_EQ(members[g].size(), pass->rule().pattern.nodes.size())
          << fused.group(static_cast<GroupId>(g)).name;
    }
    EXPECT_TRUE(testing::fusedMatchesUnfused(fused, unfused, step.feed, dtype));
  }
}

TEST_P(ShippedRules, AllTogether) {
  const DType dtype = GetParam();
  auto registry = registryWithFusionRules(PassRegistry::builtin());
  ASSERT_TRUE(registry) << registry.message();
  testing::TinyTrainingStep step = testing::tinyTrainingStep(dtype);
  Graph unfused = step.graph;
  testing::runPasses(unfused, testing::noFusion("ascend910b", *registry), *registry);

  std::vector<std::pair<std::string, bool>> on;
  size_t expected_groups = 0;
  for (const Expectation &e : kShipped) {
    on.push_back({e.rule, true});
    expected_groups += static_cast<size_t>(e.per_layer * tinyQwenLayers());
  }
  SwitchLayer layer = testing::switchPasses(on);
  layer.all[PassGroup::GraphFusion] = false;
  layer.all[PassGroup::UBFusion] = false;
  Graph fused = step.graph;
  testing::runPasses(fused, testing::contextFor("ascend910b", {layer}, *registry), *registry);
  EXPECT_EQ(fused.groups().size(), expected_groups);
  EXPECT_TRUE(testing::fusedMatchesUnfused(fused, unfused, step.feed, dtype));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ShippedRules,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const ::testing::TestParamInfo<DType> &info) {
                           return std::string(dtypeName(info.param));
                         });

} // namespace
} // namespace kiln::passes::rules
