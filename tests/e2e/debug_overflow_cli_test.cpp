// kiln debug overflow on examples/overflow: it names the QK^T of the layer
// that overflows, dumps its inputs and outputs, and verifies the fixes it
// proposes; an MLP that overflows inside a fused kernel is named op by op on
// both chips, the 910's saturation mode included, and its verified fix,
// applied by hand, gives force_fp32's loss. Finding one exits with 3.
#include <cmath>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "formats/safetensors.h"
#include "tests/e2e/cli_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using nlohmann::json;

class DebugOverflow : public Cli {
protected:
  void SetUp() override {
    Cli::SetUp();
    cfg_ = kSource + "/examples/overflow/config.json";
    ASSERT_EQ(run("init " + cfg_ + " -o " + path("w.st") +
                  " --scale 'transformer.h.*.attn.c_attn.weight=2000'")
                  .exit_code,
              0);
    ASSERT_EQ(run("make-inputs " + cfg_ + " --batch 2 --seq 16 -o " + path("i.st")).exit_code, 0);
  }
  Result debug(const std::string &flags) {
    return run("debug overflow " + cfg_ + " --weights " + path("w.st") + " --inputs " +
               path("i.st") + " --training " + attention_ + flags);
  }
  std::string cfg_;
  // The attention unfused, as on the seed's 910 (FlashAttentionFusionPass
  // would keep its scores out of fp16).
  std::string attention_ = "--disable-pass FlashAttentionFusionPass ";
};

TEST_F(DebugOverflow, NamesTheAttentionScoresOfLayerZero) {
  Result r = debug("--precision-mode allow_mix_precision --disable-pass AttentionFp32CastPass "
                   "--format json --dump-dir " +
                   path("dump"));
  ASSERT_EQ(r.exit_code, 3) << r.err;
  json report = json::parse(r.out);
  ASSERT_EQ(report["found"], true);
  EXPECT_EQ(report["op"]["name"], "transformer.h.0.attn.scores");
  EXPECT_EQ(report["op"]["op"], "BatchMatMul");
  EXPECT_EQ(report["op"]["backward"], false);
  EXPECT_GT(report["op"]["outputs"][0]["inf"].get<int64_t>(), 0);
  EXPECT_EQ(report["op"]["inputs"][0]["inf"], 0) << "its inputs were finite";
  EXPECT_EQ(report["op"]["inputs"][0]["type"], "f16[2,4,16,16]");
  ASSERT_FALSE(report["fixes"].empty());
  bool pass_verified = false;
  for (const json &fix : report["fixes"])
    pass_verified = pass_verified ||
                    (fix["verified"] == true && fix["flags"].get<std::string>().find(
                                                    "--enable-pass AttentionFp32CastPass") == 0);
  EXPECT_TRUE(pass_verified) << report["fixes"].dump(2);
  // On ascend910b the fused attention is a fix too, and verified.
  bool flash_verified = false;
  for (const json &fix : report["fixes"])
    flash_verified = flash_verified ||
                     (fix["verified"] == true &&
                      fix["flags"].get<std::string>() == "--enable-pass FlashAttentionFusionPass");
  EXPECT_TRUE(flash_verified) << report["fixes"].dump(2);
  EXPECT_EQ(report["fixes"][0]["verified"], true) << "verified fixes come first";
  auto dump = readSafetensors(report["dump"].get<std::string>());
  ASSERT_TRUE(dump.isOk()) << dump.message();
  EXPECT_EQ(dump->tensors.size(), 3u); // q, k and the scores
  EXPECT_EQ(dump->metadata["op"], "transformer.h.0.attn.scores");
}

TEST_F(DebugOverflow, UnfusedF16ModelNamesTheSameOp) {
  Result r = debug("--dtype f16 --disable-pass AttentionFp32CastPass --disable-pass "
                   "ATbeMatmulElemwiseFusionPass --no-verify");
  ASSERT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.out.find("op transformer.h.0.attn.scores (BatchMatMul), forward"), std::string::npos)
      << r.out;
}

TEST_F(DebugOverflow, WithThePassOnNothingOverflows) {
  Result r = debug("--precision-mode allow_mix_precision");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("no kernel overflowed", 0), 0u) << r.out;
}

// Layer 1's MLP overflows in f16 (w1(x) * silu(w2(x)) past 65504), inside a
// kernel the elementwise fusion formed.
class DebugMlpOverflow : public DebugOverflow {
protected:
  void SetUp() override {
    DebugOverflow::SetUp();
    attention_.clear(); // the MLP's overflow: ascend910b's default fused attention
    ASSERT_EQ(run("init " + cfg_ + " -o " + path("w.st") +
                  " --scale 'transformer.h.1.mlp.w1.weight=3000'"
                  " --scale 'transformer.h.1.mlp.w2.weight=3000'")
                  .exit_code,
              0);
  }
  // The loss `kiln run` reports for the training step with `flags`.
  double loss(const std::string &flags) {
    Result r = run("run " + cfg_ + " --weights " + path("w.st") + " --inputs " + path("i.st") +
                   " --outputs " + path("out.st") + " --training " + flags);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const size_t at = r.out.find("loss ");
    EXPECT_NE(at, std::string::npos) << r.out;
    return at == std::string::npos ? 0 : std::stod(r.out.substr(at + 5));
  }
};

TEST_F(DebugMlpOverflow, NamesTheMlpOpAndAVerifiedFixGivesForceFp32sLoss) {
  Result r = debug("--precision-mode allow_mix_precision --target ascend910b --format json "
                   "--dump-dir " +
                   path("dump"));
  ASSERT_EQ(r.exit_code, 3) << r.err;
  json report = json::parse(r.out);
  ASSERT_EQ(report["found"], true);
  EXPECT_EQ(report["op"]["name"], "transformer.h.1.mlp.mul") << report.dump(2);
  EXPECT_EQ(report["op"]["held_in_f32"], true) << "inside the SwiGLU kernel";
  EXPECT_GT(report["op"]["outputs"][0]["max"].get<double>(), 65504) << report.dump(2);
  ASSERT_FALSE(report["fixes"].empty());
  const json &best = report["fixes"][0];
  ASSERT_EQ(best["verified"], true) << report["fixes"].dump(2);
  bool bf16 = false, producers_refused = false;
  for (const json &fix : report["fixes"]) {
    bf16 = bf16 ||
           (fix["flags"] == "--precision-mode allow_mix_precision_bf16" && fix["verified"] == true);
    // Kept in f32, the product still has to be cast down for c_proj.
    producers_refused =
        producers_refused ||
        (fix["description"].get<std::string>().find("its producers") != std::string::npos &&
         fix["verified"] == false);
  }
  EXPECT_TRUE(bf16) << report["fixes"].dump(2);
  EXPECT_TRUE(producers_refused) << report["fixes"].dump(2);

  // Every verified fix, applied by hand as the report prints it.
  const double want = loss("--precision-mode force_fp32 --target ascend910b");
  ASSERT_TRUE(std::isfinite(want));
  for (const json &fix : report["fixes"]) {
    if (fix["verified"] != true)
      continue;
    const std::string flags = fix["flags"];
    const bool mode = flags.find("--precision-mode") != std::string::npos;
    const double got = loss((mode ? "" : "--precision-mode allow_mix_precision ") +
                            std::string("--target ascend910b ") + flags);
    EXPECT_TRUE(std::isfinite(got)) << fix["flags"];
    EXPECT_NEAR(got, want, 1e-2 * std::abs(want)) << fix["flags"];
  }
}

// On the 910 only the float status shows the overflow (the stored values are
// clamped), and its cube takes only f16: no precision setting can keep the
// product in range, and the report says so instead of suggesting one.
TEST_F(DebugMlpOverflow, SaturationModeNamesTheSameOpAndSaysNoPrecisionFixExists) {
  Result r = debug("--precision-mode allow_mix_precision --target ascend910 --format json");
  ASSERT_EQ(r.exit_code, 3) << r.err;
  json report = json::parse(r.out);
  EXPECT_EQ(report["op"]["name"], "transformer.h.1.mlp.mul") << report.dump(2);
  for (const json &fix : report["fixes"]) {
    EXPECT_EQ(fix["verified"], false) << fix.dump();
    EXPECT_EQ(fix["flags"].get<std::string>().find("bf16"), std::string::npos)
        << "the 910 has no bf16";
  }
  EXPECT_NE(report["reference_note"].get<std::string>().find("takes only f16 inputs"),
            std::string::npos)
      << report.dump(2);
}

// The attention case on the 910: found through the float status alone.
TEST_F(DebugOverflow, SaturationModeNamesTheAttentionScores) {
  Result r = debug("--precision-mode allow_mix_precision --disable-pass AttentionFp32CastPass "
                   "--target ascend910 --no-verify --format json");
  ASSERT_EQ(r.exit_code, 3) << r.err;
  json report = json::parse(r.out);
  EXPECT_EQ(report["op"]["name"].get<std::string>().rfind("transformer.h.0.attn.", 0), 0u)
      << report.dump(2);
  EXPECT_EQ(report["op"]["outputs"][0]["inf"], 0) << "saturation stores no inf";
}

TEST_F(DebugMlpOverflow, TextReportListsWhatWasTriedAndExitsWithThree) {
  Result r = debug("--precision-mode allow_mix_precision --target ascend910b");
  ASSERT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.out.find("op transformer.h.1.mlp."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fixes, each re-run on this step and checked against the force_fp32 run"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--precision-mode allow_mix_precision_bf16"), std::string::npos) << r.out;
}

TEST_F(DebugOverflow, MissingInputsAreOneLineErrors) {
  Result r =
      run("debug overflow " + cfg_ + " --weights " + path("nope.st") + " --inputs " + path("i.st"));
  expectError(r, {"nope.st"});
}

} // namespace
} // namespace kiln
