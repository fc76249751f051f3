// A rewrite of the step a job asks for by its own flag (--recompute) is
// decided by that flag: a switch file's "GraphFusion": {"ALL": "off"} turns
// off the fusion passes and leaves it on, and it runs through the pass
// manager and shows in the compile report.
#include <gtest/gtest.h>

#include "compiler/driver/compile.h"
#include "compiler/driver/job.h"
#include "passes/pass_switches.h"

namespace kiln::driver {
namespace {

const std::string kTiny = std::string(KILN_SOURCE_DIR) + "/examples/qwen-tiny/config.json";

Expected<ResolvedJob> graphFusionOffWithRecompute() {
  JobSettings file;
  file.source = "job.json";
  KILN_ASSIGN_OR_RETURN(file.fusion_switch,
                        passes::parseSwitchText(R"({"Switch": {"GraphFusion": {"ALL": "off"}}})",
                                                "job.json: fusion_switch"));
  file.recompute = passes::RecomputeMode::Full;
  JobSettings flags;
  flags.source = "test";
  return resolveJob(file, flags, DType::F16);
}

TEST(StepRewrite, GraphFusionAllOffLeavesRecomputeOn) {
  auto job = graphFusionOffWithRecompute();
  ASSERT_TRUE(job) << job.message();
  const passes::Pass *recompute = job->registry->find("RecomputePass");
  const passes::Pass *bias_add = job->registry->find("MatMulBiasAddFusionPass");
  ASSERT_NE(recompute, nullptr);
  ASSERT_NE(bias_add, nullptr);
  EXPECT_TRUE(job->context->willRun(*recompute)) << job->context->decide(*recompute).decided_by;
  EXPECT_FALSE(job->context->willRun(*bias_add)) << "the switch file's ALL still applies";
}

TEST(StepRewrite, ANamedSettingStillSwitchesItOff) {
  JobSettings file;
  file.source = "job.json";
  auto layer = passes::parseSwitchText(R"({"Switch": {"StepRewrite": {"RecomputePass": "off"}}})",
                                       "job.json: fusion_switch");
  ASSERT_TRUE(layer) << layer.message();
  file.fusion_switch = *layer;
  file.recompute = passes::RecomputeMode::Full;
  auto job = resolveJob(file, JobSettings{}, DType::F16);
  ASSERT_TRUE(job) << job.message();
  const passes::PassDecision d = job->context->decide(*job->registry->find("RecomputePass"));
  EXPECT_FALSE(d.runs());
  EXPECT_NE(d.decided_by.find("job.json"), std::string::npos) << d.decided_by;
}

TEST(StepRewrite, RecomputeRunsInTheReportUnderGraphFusionAllOff) {
  auto job = graphFusionOffWithRecompute();
  ASSERT_TRUE(job) << job.message();
  auto graph = buildModelGraph({kTiny, /*training=*/true, 2, 8}, *job);
  ASSERT_TRUE(graph) << graph.message();
  auto report = compileGraph(*graph, *job);
  ASSERT_TRUE(report) << report.message();
  const passes::PassRecord *r = report->find("RecomputePass");
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(r->ran);
  EXPECT_GT(r->result.effect_times, 0) << "every layer of the tiny model is recomputed";
  const passes::PassRecord *fused = report->find("MatMulBiasAddFusionPass");
  ASSERT_NE(fused, nullptr);
  EXPECT_FALSE(fused->ran);
}

} // namespace
} // namespace kiln::driver
