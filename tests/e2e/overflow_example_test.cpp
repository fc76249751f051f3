// examples/overflow as its README runs it: the fp16 attention overflow and
// AttentionFp32CastPass fixing it, through the kiln command line.
#include <cmath>

#include <gtest/gtest.h>

#include "tests/e2e/cli_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;

class OverflowExample : public Cli {
protected:
  void SetUp() override {
    Cli::SetUp();
    cfg_ = kSource + "/examples/overflow/config.json";
    ASSERT_EQ(run("init " + cfg_ + " -o " + path("w.safetensors") +
                  " --scale 'transformer.h.*.attn.c_attn.weight=2000'")
                  .exit_code,
              0);
    ASSERT_EQ(
        run("make-inputs " + cfg_ + " --batch 2 --seq 16 -o " + path("i.safetensors")).exit_code,
        0);
  }
  // loss and grad_norm of one training step with `flags`, the attention
  // unfused as on the seed's 910 unless `fused` (FlashAttentionFusionPass,
  // on by default on ascend910b, keeps the scores out of fp16).
  std::pair<double, double> step(const std::string &flags, bool fused = false) {
    Result r = run("run " + cfg_ + " --weights " + path("w.safetensors") + " --inputs " +
                   path("i.safetensors") + " --outputs " + path("o.safetensors") + " --training " +
                   (fused ? "" : "--disable-pass FlashAttentionFusionPass ") + flags);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto value = [&](const std::string &key) {
      size_t at = r.out.find(key + " ");
      return at == std::string::npos ? NAN
                                     : std::strtod(r.out.c_str() + at + key.size() + 1, nullptr);
    };
    return {value("loss"), value("grad_norm")};
  }
  std::string cfg_;
};

TEST_F(OverflowExample, AttentionFp32CastPassPreventsTheOverflow) {
  auto [ref_loss, ref_norm] = step("--precision-mode force_fp32");
  ASSERT_TRUE(std::isfinite(ref_loss));
  auto [nan_loss, nan_norm] =
      step("--precision-mode allow_mix_precision --disable-pass AttentionFp32CastPass");
  EXPECT_FALSE(std::isfinite(nan_loss)) << "infnan: QK^T overflows to inf";
  auto [sat_loss, sat_norm] = step("--precision-mode allow_mix_precision --disable-pass "
                                   "AttentionFp32CastPass --overflow-mode saturation");
  EXPECT_TRUE(std::isfinite(sat_loss));
  EXPECT_GT(std::abs(sat_norm - ref_norm), 0.5 * ref_norm) << "saturated, visibly wrong";
  auto [loss, norm] = step("--precision-mode allow_mix_precision");
  EXPECT_NEAR(loss, ref_loss, 1e-2 * ref_loss);
  EXPECT_NEAR(norm, ref_norm, 1e-2 * ref_norm);
  // The fused attention needs no precision pass.
  auto [fused_loss, fused_norm] =
      step("--precision-mode allow_mix_precision --disable-pass AttentionFp32CastPass", true);
  EXPECT_NEAR(fused_loss, ref_loss, 1e-2 * ref_loss);
  EXPECT_NEAR(fused_norm, ref_norm, 1e-2 * ref_norm);
}

TEST_F(OverflowExample, BadPrecisionFlagsAreOneLineErrors) {
  const std::string base = "run " + cfg_ + " --weights " + path("w.safetensors") + " --inputs " +
                           path("i.safetensors") + " --outputs " + path("o.safetensors");
  expectUsageError(run(base + " --precision-mode fp8"), {"fp8", "force_fp32"});
  expectUsageError(run(base + " --disable-pass PrecisionModePass"), {"may not be disabled"});
  expectUsageError(run(base + " --target ascend910 --precision-mode allow_mix_precision_bf16"),
                   {"bf16", "ascend910"});
  write("mix.json", R"({"black-list": {"to-add": ["Softmx"]}})");
  expectRunError(
      run(base + " --precision-mode allow_mix_precision --modify-mixlist " + path("mix.json")),
      {"mix.json", "Softmx", "Softmax"});
  write("keep.txt", "OpType::Sofmax\n");
  expectRunError(
      run(base + " --precision-mode allow_mix_precision --keep-dtype " + path("keep.txt")),
      {"keep.txt", "line 1"});
}

} // namespace
} // namespace kiln
