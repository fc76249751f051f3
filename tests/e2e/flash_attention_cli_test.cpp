// FlashAttentionFusionPass through the CLI: with the pass on, `kiln run
// --training` on the compiled kernels gives every family's loss and
// gradients of a float64 model; training layouts equal one device; the
// seed's fp16 attention overflow runs finite without AttentionFp32CastPass;
// the report says which pass handled each layer, and on the 910 why the
// fused attention does not apply.
#include <cmath>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "formats/safetensors.h"
#include "tests/e2e/cli_fixture.h"
#include "tests/support/random.h"
#include "tests/support/reference_decoder.h"
#include "tests/support/reference_qwen.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using nlohmann::json;

const std::string kFlash = " --enable-pass FlashAttentionFusionPass";

std::string example(const std::string &name) { return kSource + "/examples/" + name; }

class FlashAttentionCli : public Cli {
protected:
  std::vector<double> losses(const std::string &model, const std::string &name,
                             const std::string &flags) {
    return trainLosses(model + " --data train.bin --batch 4 --seq 32 --lr 1e-2 --steps 6 " + flags,
                       name + ".jsonl");
  }
};

TEST_F(FlashAttentionCli, EveryFamilysGradientsMatchAFloat64Model) {
  for (const std::string name : {"qwen2-tiny", "llama-tiny", "qwen3-tiny"}) {
    SCOPED_TRACE(name);
    auto config = frontend::readDecoderConfig(example(name) + "/config.json");
    ASSERT_TRUE(config.isOk()) << config.message();
    std::map<std::string, Tensor> weights = largeRandomQwenWeights(*config);
    SafetensorsFile w;
    w.tensors = weights;
    ASSERT_TRUE(writeSafetensors(path("w.safetensors"), w).isOk());
    const Tensor ids = randomIndices(TensorType{DType::I64, {2, 11}}, 7, config->vocab_size);
    SafetensorsFile inputs;
    inputs.tensors["input_ids"] = ids;
    ASSERT_TRUE(writeSafetensors(path("in.safetensors"), inputs).isOk());
    Result r = run("run " + example(name) +
                   " --weights w.safetensors --inputs in.safetensors --outputs out.safetensors "
                   "--training" +
                   kFlash);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_EQ(
        run("compile " + example(name) + " --training --report report.json" + kFlash).exit_code, 0);
    const json report = json::parse(slurp(path("report.json")));
    for (const json &p : report["passes"]) {
      if (p["name"] == "FlashAttentionFusionPass") {
        EXPECT_EQ(p["effect_times"], 2) << "both layers fused";
      }
    }
    auto out = readSafetensors(path("out.safetensors"));
    ASSERT_TRUE(out.isOk()) << out.message();
    ReferenceDecoder reference(*config, weights);
    const double loss = reference.forward(ids).second;
    EXPECT_NEAR(out->tensors.at("loss").getFloat(0), loss, 1e-5 * loss);
    for (const auto &[tensor, t] : out->tensors) {
      if (tensor.rfind("grad.", 0) != 0)
        continue;
      Tensor &param = weights.at(tensor.substr(5));
      for (int64_t k = 0; k < 2; ++k) {
        const int64_t j = (k * 7919 + 31) % param.numElements();
        const double numeric = reference.centralDifference(ids, param, j);
        EXPECT_NEAR(t.getFloat(j), numeric, 1e-4 + 1e-3 * std::abs(numeric))
            << tensor << " element " << j;
      }
    }
  }
}

TEST_F(FlashAttentionCli, LayoutsWithThePassEqualOneDevice) {
  writeLearnableTokens("train.bin");
  const std::string model = example("qwen2-tiny");
  const std::vector<double> plain = losses(model, "plain", "--devices 1");
  const std::vector<double> one = losses(model, "one", "--devices 1" + kFlash);
  ASSERT_EQ(one.size(), 6u);
  for (size_t i = 0; i < one.size(); ++i)
    EXPECT_NEAR(one[i], plain[i], 1e-5 * plain[i]) << "fused against unfused, step " << i + 1;
  for (const auto &[name, flags] : std::vector<std::pair<std::string, std::string>>{
           {"tp2", "--devices 2 --tp 2"},
           {"pp2", "--devices 2 --pp 2 --micro-batches 2"},
           {"zero3-recompute", "--devices 2 --zero 3 --recompute full"}}) {
    const std::vector<double> got = losses(model, name, flags + kFlash);
    ASSERT_EQ(got.size(), one.size()) << name;
    for (size_t i = 0; i < one.size(); ++i)
      EXPECT_NEAR(got[i], one[i], 1e-5 * one[i]) << name << " step " << i + 1;
  }
}

TEST_F(FlashAttentionCli, TheSeedsOverflowRunsFiniteWithoutAttentionFp32CastPass) {
  const std::string cfg = kSource + "/examples/overflow/config.json";
  ASSERT_EQ(
      run("init " + cfg + " -o ow.safetensors --scale 'transformer.h.*.attn.c_attn.weight=2000'")
          .exit_code,
      0);
  ASSERT_EQ(run("make-inputs " + cfg + " --batch 2 --seq 16 -o oi.safetensors").exit_code, 0);
  const std::string run_cfg = "run " + cfg +
                              " --weights ow.safetensors --inputs oi.safetensors --outputs "
                              "oo.safetensors --training --precision-mode allow_mix_precision "
                              "--disable-pass AttentionFp32CastPass";
  Result unfused = run(run_cfg + " --disable-pass FlashAttentionFusionPass");
  EXPECT_NE(unfused.out.find("nan"), std::string::npos) << unfused.out;
  Result fused = run(run_cfg); // ascend910b's default
  ASSERT_EQ(fused.exit_code, 0) << fused.err;
  Result fp32 = run("run " + cfg +
                    " --weights ow.safetensors --inputs oi.safetensors --outputs f32.safetensors "
                    "--training --precision-mode force_fp32");
  ASSERT_EQ(fp32.exit_code, 0) << fp32.err;
  auto got = readSafetensors(path("oo.safetensors")),
       want = readSafetensors(path("f32.safetensors"));
  ASSERT_TRUE(got.isOk() && want.isOk());
  const double loss = got->tensors.at("loss").getFloat(0);
  ASSERT_TRUE(std::isfinite(loss)) << fused.out;
  EXPECT_NEAR(loss, want->tensors.at("loss").getFloat(0), 1e-3);

  // With both passes on, the report says the fused attention left nothing to
  // AttentionFp32CastPass.
  ASSERT_EQ(run("compile " + cfg +
                " --training --precision-mode allow_mix_precision --report both.json" + kFlash)
                .exit_code,
            0);
  const json report = json::parse(slurp(path("both.json")));
  bool handled = false;
  for (const json &p : report["passes"])
    if (p["name"] == "AttentionFp32CastPass")
      for (const json &r : p["not_fused"])
        handled = handled || r["reason"].get<std::string>().find("FlashAttentionFusionPass") !=
                                 std::string::npos;
  EXPECT_TRUE(handled) << report.dump(1);
}

TEST_F(FlashAttentionCli, OnThe910TheReportSaysWhyItDoesNotApply) {
  Result r = run("compile " + example("qwen2-tiny") +
                 " --training --dtype f16 --target ascend910 --report report.json" + kFlash);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json report = json::parse(slurp(path("report.json")));
  bool found = false;
  for (const json &p : report["passes"])
    if (p["name"] == "FlashAttentionFusionPass") {
      found = true;
      EXPECT_EQ(p["applicable"], false);
      EXPECT_NE(p["reason"].get<std::string>().find("Atlas A2"), std::string::npos) << p.dump();
      EXPECT_EQ(p["effect_times"], 0);
    }
  EXPECT_TRUE(found);
}

} // namespace
} // namespace kiln
