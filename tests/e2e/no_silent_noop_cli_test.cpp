// Every flag takes effect or is refused, and kiln says what happened: a
// resume with nothing left to train says so, kiln run notes an overflow as
// the trainer does, merge and inspect stay short unless asked, and the
// errors that have a usual next step name it.
#include <regex>

#include "tests/e2e/cli_fixture.h"

namespace kiln::testing {
namespace {

using QuietCli = Cli;

size_t count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

TEST_F(QuietCli, ResumingAtOrPastTheStepsSaysSoAndExits0) {
  writeLearnableTokens("train.bin");
  const std::string train = "train " + kTiny + " --data train.bin --batch 2 --seq 16 --devices 1 " +
                            "--checkpoint-dir ckpt ";
  ASSERT_EQ(run(train + "--steps 2").exit_code, 0);
  for (const std::string steps : {"2", "1"}) {
    Result r = run(train + "--steps " + steps + " --resume --log-json log.jsonl");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("already at step 2 of " + steps + ", nothing to train"), std::string::npos)
        << r.out;
    EXPECT_EQ(r.out.find("step 3/"), std::string::npos) << r.out;
  }
  EXPECT_TRUE(slurp(path("log.jsonl")).empty()) << "no step was logged";
}

// The overflow example (examples/overflow): QK^T overflows fp16 without
// AttentionFp32CastPass.
class RunOverflowNote : public Cli {
protected:
  void SetUp() override {
    Cli::SetUp();
    ASSERT_EQ(run("init " + cfg_ +
                  " -o w.safetensors --scale "
                  "'transformer.h.*.attn.c_attn.weight=2000'")
                  .exit_code,
              0);
    ASSERT_EQ(run("make-inputs " + cfg_ + " --batch 2 --seq 16 -o i.safetensors").exit_code, 0);
  }
  // The attention unfused, as on the seed's 910 (FlashAttentionFusionPass
  // would keep its scores out of fp16).
  Result step(const std::string &flags) {
    return run("run " + cfg_ + " --weights w.safetensors --inputs i.safetensors --outputs " +
               "o.safetensors --training --precision-mode allow_mix_precision " +
               "--disable-pass FlashAttentionFusionPass " + flags);
  }
  const std::string cfg_ = kSource + "/examples/overflow/config.json";
};

TEST_F(RunOverflowNote, ANanLossAndASetFloatStatusAreNoted) {
  for (const std::string mode : {"", " --reference"}) {
    SCOPED_TRACE(mode);
    Result nan = step("--disable-pass AttentionFp32CastPass" + mode);
    EXPECT_EQ(nan.exit_code, 0) << nan.err;
    EXPECT_NE(nan.out.find("overflow: 'loss' is nan; float status 0x1 (set)"), std::string::npos)
        << nan.out;
    EXPECT_NE(nan.out.find("kiln debug overflow"), std::string::npos) << nan.out;
    // Saturation keeps the values finite: the float status is the only trace.
    Result saturated =
        step("--disable-pass AttentionFp32CastPass --overflow-mode saturation" + mode);
    EXPECT_EQ(saturated.exit_code, 0) << saturated.err;
    EXPECT_NE(saturated.out.find("overflow: the outputs are finite but may be wrong"),
              std::string::npos)
        << saturated.out;
    EXPECT_NE(saturated.out.find("float status 0x1 (set)"), std::string::npos) << saturated.out;
    Result fixed = step(mode);
    EXPECT_EQ(fixed.exit_code, 0) << fixed.err;
    EXPECT_EQ(fixed.out.find("overflow"), std::string::npos) << fixed.out;
  }
}

TEST_F(RunOverflowNote, BisectOfANanJobPointsAtDebugOverflow) {
  Result r = run("debug bisect " + cfg_ + " --training --check accuracy --weights w.safetensors " +
                 "--inputs i.safetensors --precision-mode allow_mix_precision --disable-pass " +
                 "AttentionFp32CastPass,FlashAttentionFusionPass");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("no pass causes it"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("'kiln debug overflow' with the same model"), std::string::npos) << r.out;
}

TEST_F(QuietCli, MergeSaysOnceThatACheckpointsOptimizerStateIsIgnored) {
  writeLearnableTokens("train.bin");
  const std::string train =
      "train " + kTiny + " --data train.bin --batch 2 --seq 16 --devices 1 --steps 1 ";
  ASSERT_EQ(run(train + "--checkpoint-dir full").exit_code, 0);
  ASSERT_EQ(run(train + "--lora-rank 4 --checkpoint-dir lora").exit_code, 0);
  Result r = run("merge " + kTiny + " --weights full/step-000001.safetensors --lora " +
                 "lora/step-000001-adapter -o merged");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count(r.err, "not a parameter"), 1u) << r.err;
  EXPECT_EQ(count(r.err, "\n"), 2u) << "the ignored tensors and the merge: " << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex("full/step-000001.safetensors: [0-9]+ tensors "
                                                  "are not a parameter of the model \\(e.g. "
                                                  "'adam\\.[^']+', a kiln checkpoint's optimizer "
                                                  "state\\); ignored")))
      << r.err;
}

TEST_F(QuietCli, RunSaysOnceThatACheckpointsOptimizerStateIsIgnored) {
  writeLearnableTokens("train.bin");
  ASSERT_EQ(run("train " + kTiny + " --data train.bin --batch 2 --seq 16 --devices 1 --steps 1 " +
                "--checkpoint-dir full")
                .exit_code,
            0);
  ASSERT_EQ(run("make-inputs " + kTiny + " --batch 1 --seq 8 -o i.safetensors").exit_code, 0);
  Result r = run("run " + kTiny +
                 " --weights full/step-000001.safetensors --inputs i.safetensors --outputs "
                 "o.safetensors");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count(r.err, "not a parameter"), 1u) << r.err;
  EXPECT_NE(r.err.find("a kiln checkpoint's optimizer state"), std::string::npos) << r.err;
}

TEST_F(QuietCli, InspectListsAFewKernelsUnlessAskedForAll) {
  ASSERT_EQ(run("compile " + kTiny + " --seq 8 --training -o job.kiln").exit_code, 0);
  Result all = run("inspect job.kiln --kernels all");
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(all.out.find(" more (kiln inspect --kernels all lists them)"), std::string::npos);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(all.out, m, std::regex(R"((\d+) kernels \()"))) << all.out;
  const size_t kernels = std::stoul(m[1].str());
  ASSERT_GT(kernels, 20u);

  Result shown = run("inspect job.kiln");
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("    ... and " + std::to_string(kernels - 20) +
                           " more (kiln inspect --kernels all lists them)"),
            std::string::npos)
      << shown.out;
  EXPECT_LT(count(shown.out, "\n"), count(all.out, "\n"));

  Result three = run("inspect job.kiln --kernels 3");
  ASSERT_EQ(three.exit_code, 0) << three.err;
  EXPECT_NE(three.out.find("\n    2  "), std::string::npos) << three.out;
  EXPECT_EQ(three.out.find("\n    3  "), std::string::npos) << three.out;
  EXPECT_NE(three.out.find("... and " + std::to_string(kernels - 3) + " more"), std::string::npos);
}

TEST_F(QuietCli, AKernelThatCannotBeBuiltNamesTheNextSteps) {
  const std::string example = kSource + "/examples/debug";
  Result r = run("compile " + example + "/graph.json --job " + example + "/job.json --training");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("E40001"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("'kiln debug bisect' with the same model and flags"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--on-compile-error fallback"), std::string::npos) << r.err;
}

} // namespace
} // namespace kiln::testing
