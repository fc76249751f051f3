// kiln debug bisect: on Qwen-14B compiled for an ascend910b with a 16 KiB
// Unified Buffer, it names RmsNormFusionPass and the first group it formed,
// and the flag it prints does avoid the failure; --check accuracy never
// blames the fix of an overflow.
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

// examples/overflow: with every switchable pass off the f16 attention
// overflows to NaN. Taken as truth, that run would make AttentionFp32CastPass
// (the fix) look like the culprit; the reference is the force_fp32 run instead.
TEST_F(DebugBisect, AccuracyNeverBlamesTheFixOfAnOverflow) {
  const std::string cfg = kSource + "/examples/overflow/config.json";
  ASSERT_EQ(run("init " + cfg + " -o " + path("w.st") +
                " --scale 'transformer.h.*.attn.c_attn.weight=2000'")
                .exit_code,
            0);
  ASSERT_EQ(run("make-inputs " + cfg + " --batch 2 --seq 16 -o " + path("i.st")).exit_code, 0);
  Result r = run("debug bisect " + cfg + " --training --seq 16 --batch 2 --check accuracy " +
                 "--precision-mode allow_mix_precision --weights " + path("w.st") + " --inputs " +
                 path("i.st") + " --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("AttentionFp32CastPass\""), std::string::npos) << r.out;
  json report = json::parse(r.out);
  EXPECT_FALSE(report.contains("culprit")) << report.dump(2);
  EXPECT_NE(report["reference"].get<std::string>().find("force_fp32"), std::string::npos)
      << report.dump(2);
  EXPECT_NE(report["reference"].get<std::string>().find("not finite"), std::string::npos)
      << report.dump(2);
  EXPECT_EQ(report["job_fails"], false) << report.dump(2);

  // Switched off by hand (with the fused attention, which would keep the
  // scores out of fp16), the run without the fix is what fails; no pass is
  // blamed.
  Result off = run("debug bisect " + cfg + " --training --seq 16 --batch 2 --check accuracy " +
                   "--precision-mode allow_mix_precision --disable-pass AttentionFp32CastPass " +
                   "--disable-pass FlashAttentionFusionPass " + "--weights " + path("w.st") +
                   " --inputs " + path("i.st") + " --format json");
  ASSERT_EQ(off.exit_code, 0) << off.err;
  json off_report = json::parse(off.out);
  EXPECT_EQ(off_report["job_fails"], true) << off_report.dump(2);
  EXPECT_EQ(off_report["fails_without_passes"], true) << off_report.dump(2);
  EXPECT_FALSE(off_report.contains("culprit")) << off_report.dump(2);
}

// When even force_fp32 overflows there is nothing to compare with: an error
// that says so, not a culprit.
TEST_F(DebugBisect, ANonFiniteReferenceIsAnError) {
  const std::string cfg = kSource + "/examples/overflow/config.json";
  ASSERT_EQ(run("init " + cfg + " -o " + path("w.st") +
                " --scale 'transformer.h.*.attn.c_attn.weight=1e30'")
                .exit_code,
            0);
  ASSERT_EQ(run("make-inputs " + cfg + " --batch 2 --seq 16 -o " + path("i.st")).exit_code, 0);
  Result r = run("debug bisect " + cfg + " --training --seq 16 --batch 2 --check accuracy " +
                 "--precision-mode allow_mix_precision --weights " + path("w.st") + " --inputs " +
                 path("i.st"));
  expectError(r, {"no finite reference", "force_fp32", "kiln debug overflow"});
  EXPECT_EQ(r.out.find("culprit"), std::string::npos) << r.out;
}

TEST_F(DebugBisect, AccuracyNeedsWeightsAndInputs) {
  Result r = run("debug bisect " + kTiny + " --check accuracy");
  expectError(r, {"--weights", "--inputs"});
  ASSERT_EQ(run("make-inputs " + kTiny + " --batch 1 --seq 8 -o " + path("i.st")).exit_code, 0);
  r = run("debug bisect " + kTiny + " --check accuracy --inputs " + path("i.st"));
  expectError(r, {"--weights is required", "holds no weights"});
}

} // namespace
} // namespace kiln
