// kiln debug bisect: on Qwen-14B compiled for an ascend910b with a 16 KiB
// Unified Buffer, it names RmsNormFusionPass and the first group it formed,
// and the flag it prints does avoid the failure.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/cli_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using nlohmann::json;

class DebugBisect : public Cli {};

TEST_F(DebugBisect, NamesTheRuleThatFormedTheFailingKernel) {
  std::string target = slurp(kSource + "/target/data/ascend910b.json");
  target.replace(target.find("196608"), 6, "16384");
  write("small_ub.json", target);
  const std::string job = k14b + " --training --seq 512 --target " + path("small_ub.json");
  Result r = run("debug bisect " + job + " --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = json::parse(r.out);
  EXPECT_EQ(report["job_fails"], true);
  EXPECT_EQ(report["culprit"], "RmsNormFusionPass");
  EXPECT_EQ(report["group"], "UBFusion");
  EXPECT_EQ(report["application"], 1);
  EXPECT_EQ(report["fused_group"], "fused.transformer.h.0.ln_1.mean");
  EXPECT_EQ(report["switch_file"]["Switch"]["UBFusion"]["RmsNormFusionPass"], "off");
  EXPECT_LT(report["trials"].get<int>(), 25);
  Result fixed = run("compile " + job + " " + report["flag"].get<std::string>());
  EXPECT_EQ(fixed.exit_code, 0) << fixed.err;
}

TEST_F(DebugBisect, AJobThatCompilesHasNothingToBisect) {
  Result r = run("debug bisect " + kTiny + " --training --seq 8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("the job does not fail: nothing to bisect"), std::string::npos) << r.out;
}

// In f16, AttentionFp32CastPass is the first pass of the pipeline that
// changes a bit of the results (the attention runs in f32).
TEST_F(DebugBisect, AccuracyAtToleranceZeroFindsThePassThatChangesBits) {
  ASSERT_EQ(run("init " + kTiny + " -o " + path("w.st")).exit_code, 0);
  ASSERT_EQ(run("make-inputs " + kTiny + " --batch 2 --seq 8 -o " + path("i.st")).exit_code, 0);
  Result r = run("debug bisect " + kTiny + " --training --check accuracy --tol 0 --dtype f16 " +
                 "--weights " + path("w.st") + " --inputs " + path("i.st") + " --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = json::parse(r.out);
  EXPECT_EQ(report["job_fails"], true);
  EXPECT_EQ(report["fails_without_passes"], false);
  EXPECT_EQ(report["culprit"], "AttentionFp32CastPass") << report.dump(2);
}

TEST_F(DebugBisect, AccuracyNeedsWeightsAndInputs) {
  Result r = run("debug bisect " + kTiny + " --check accuracy");
  expectError(r, {"--weights", "--inputs"});
}

} // namespace
} // namespace kiln
