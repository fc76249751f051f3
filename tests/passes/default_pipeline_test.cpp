// The whole default pipeline of a job, as kiln compile runs it: on the tiny
// Qwen training step every fusion pass and rule fires, and the fused step
// agrees with the unfused one (every GraphFusion and UBFusion pass off) within
// rounding, in every dtype of the target.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/driver/compile.h"
#include "compiler/driver/job.h"
#include "compiler/driver/pass_listing.h"
#include "passes/fusion/flash_attention_fusion.h"
#include "tests/support/pass_test_util.h"

namespace kiln::driver {
namespace {

ResolvedJob jobFor(const std::string &target, DType dtype, const std::string &switch_json = "") {
  JobSettings cli;
  cli.target = target;
  cli.dtype = dtype;
  if (!switch_json.empty()) {
    auto layer = passes::parseSwitchObject(nlohmann::json::parse(switch_json), "test");
    EXPECT_TRUE(layer) << layer.message();
    cli.fusion_switch = *layer;
  }
  auto job = resolveJob(std::nullopt, cli, DType::F16);
  EXPECT_TRUE(job) << job.message();
  return std::move(*job);
}

constexpr const char *kAllOff =
    R"({"Switch": {"GraphFusion": {"ALL": "off"}, "UBFusion": {"ALL": "off"}}})";

class DefaultPipeline : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

TEST_P(DefaultPipeline, FusedAgreesWithUnfused) {
  const auto &[target, dtype] = GetParam();
  kiln::testing::TinyTrainingStep step = kiln::testing::tinyTrainingStep(dtype);
  Graph fused = step.graph, unfused = step.graph;
  ResolvedJob on = jobFor(target, dtype), off = jobFor(target, dtype, kAllOff);
  auto report = compileGraph(fused, on);
  ASSERT_TRUE(report) << report.message();
  ASSERT_TRUE(compileGraph(unfused, off));
  EXPECT_TRUE(unfused.groups().empty());

  for (const passes::PassRecord &r : report->passes) {
    if (r.group != passes::PassGroup::GraphFusion && r.group != passes::PassGroup::UBFusion)
      continue;
    if (!r.not_applicable.empty()) {
      EXPECT_EQ(r.result.effect_times, 0) << r.name;
      continue;
    }
    // FlashAttentionFusionPass fuses a model's forward before autodiff (the
    // driver); in a finished training step the backward reads every
    // softmax's probabilities, so it leaves them alone here.
    if (r.name == passes::kFlashAttentionPassName) {
      EXPECT_EQ(r.result.effect_times, 0);
      continue;
    }
    // Every fusion pass and rule finds work in a Qwen training step; except
    // that an all-f32 step has no epilogue FixPipe applies once
    // MatMulBiasAddFusionPass has folded the biases (no Casts to fuse).
    // The same for CastFusionPass: an all-f32 step has no Cast.
    if (dtype == DType::F32 &&
        (r.name == "TbeMatmulFixPipeFusionPass" || r.name == "CastFusionPass"))
      continue;
    // The gradient scale AdamWPrologueFusionPass folds is the update
    // program's (adamw_prologue_codegen_test); this step's AdamW reads the
    // gradient as it is made.
    if (r.name == "AdamWPrologueFusionPass")
      continue;
    EXPECT_GT(r.result.effect_times, 0) << r.name << " on " << target;
  }
  EXPECT_TRUE(kiln::testing::fusedMatchesUnfused(fused, unfused, step.feed, dtype));
}

INSTANTIATE_TEST_SUITE_P(
    Targets, DefaultPipeline,
    ::testing::Values(std::tuple{"ascend910b", DType::F32}, std::tuple{"ascend910b", DType::F16},
                      std::tuple{"ascend910b", DType::BF16}, std::tuple{"ascend910", DType::F16}),
    [](const auto &info) {
      return std::get<0>(info.param) + "_" + std::string(dtypeName(std::get<1>(info.param)));
    });

TEST(DefaultPipeline, FixPipeDoesNotApplyOnAscend910) {
  kiln::testing::TinyTrainingStep step = kiln::testing::tinyTrainingStep(DType::F16);
  auto report = compileGraph(step.graph, jobFor("ascend910", DType::F16));
  ASSERT_TRUE(report) << report.message();
  const passes::PassRecord *fixpipe = report->find("TbeMatmulFixPipeFusionPass");
  ASSERT_NE(fixpipe, nullptr);
  EXPECT_FALSE(fixpipe->ran);
  EXPECT_NE(fixpipe->not_applicable.find("no FixPipe"), std::string::npos)
      << fixpipe->not_applicable;
  for (const FusionGroup &g : step.graph.groups())
    EXPECT_NE(g.formed_by, "TbeMatmulFixPipeFusionPass");
}

} // namespace
} // namespace kiln::driver

namespace kiln::driver {
namespace {

// docs/passes.md is generated from the registry; regenerate it with
// `kiln passes list --format markdown > docs/passes.md` when a pass changes.
TEST(PassDocs, DocsPassesMdIsUpToDate) {
  auto job = resolveJob(std::nullopt, JobSettings{}, DType::F16);
  ASSERT_TRUE(job) << job.message();
  std::ifstream in(std::string(KILN_SOURCE_DIR) + "/docs/passes.md");
  std::stringstream file;
  file << in.rdbuf();
  EXPECT_EQ(file.str(), passesToMarkdown(*job->registry))
      << "docs/passes.md is stale: run kiln passes list --format markdown > docs/passes.md";
}

} // namespace
} // namespace kiln::driver
