// Precision settings as a user writes them: typos in keep_dtype and
// --attention-fp32-layers are errors with the nearest names, the compile
// report says what every list-like setting matched, and CANN's own files and
// spellings (op types, pass groups, force_lowerprecision, precision_mode_v2)
// are read as CANN means them.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/cli_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using nlohmann::json;

class PrecisionCli : public Cli {
protected:
  // The tiny training step through the passes only (no kernels: fast).
  // The attention unfused: the settings below name its scores and softmax,
  // which FlashAttentionFusionPass (on by default on ascend910b) fuses away.
  Result compile(const std::string &flags) {
    return run("compile " + kTiny +
               " --training --seq 8 --passes-only --disable-pass FlashAttentionFusionPass " +
               flags);
  }
};

TEST_F(PrecisionCli, AKeepDTypeNameNoNodeHasIsAnError) {
  write("keep.txt", "# layer 1's softmax\ntransformer.h.1.attn.sotfmax\n");
  expectRunError(compile("--precision-mode allow_mix_precision --keep-dtype " + path("keep.txt")),
                 {"keep.txt: line 2: no node named 'transformer.h.1.attn.sotfmax'",
                  "did you mean transformer.h.1.attn.softmax"});
}

// A node the fused attention took in is named with the pass that took it.
TEST_F(PrecisionCli, AKeepDTypeNameTheFusedAttentionTookInSaysSo) {
  write("keep.txt", "transformer.h.0.attn.softmax\n");
  expectRunError(run("compile " + kTiny +
                     " --training --seq 8 --passes-only --precision-mode allow_mix_precision "
                     "--keep-dtype " +
                     path("keep.txt")),
                 {"keep.txt: line 1: node 'transformer.h.0.attn.softmax' was fused into "
                  "FlashAttentionScore 'transformer.h.0.attn.flash_attention' by "
                  "FlashAttentionFusionPass",
                  "--disable-pass FlashAttentionFusionPass"});
}

TEST_F(PrecisionCli, AttentionLayersTheModelLacksAreAnError) {
  expectRunError(
      compile("--precision-mode allow_mix_precision --attention-fp32-layers 5"),
      {"--attention-fp32-layers: layer 5 is not in graph", "its layers: 0, 1", "did you mean 1?"});
  write("job.json", R"({"precision": {"attention_fp32_layers": [0, 7]}})");
  expectRunError(compile("--job " + path("job.json")),
                 {"job.json: $.precision.attention_fp32_layers: layer 7"});
}

// Every entry of keep_dtype, modify_mixlist and attention_fp32_layers is in
// the report with the nodes it matched (0 for an op type this graph lacks).
TEST_F(PrecisionCli, TheReportSaysWhatEverySettingMatched) {
  write("keep.txt", "transformer.h.0.attn.scores\nOpType::SoftmaxV2\nOpType::Sigmoid\n");
  write("mix.json", R"({"white-list": {"to-remove": ["MatMulV2"]}})");
  Result r = compile("--precision-mode allow_mix_precision --keep-dtype " + path("keep.txt") +
                     " --modify-mixlist " + path("mix.json") +
                     " --attention-fp32-layers 1 --report " + path("r.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = json::parse(slurp(path("r.json")));
  ASSERT_EQ(report["settings"].size(), 5u) << report["settings"].dump(2);
  auto entry = [&](size_t i) { return report["settings"][i]; };
  EXPECT_EQ(entry(0)["setting"], "keep_dtype");
  EXPECT_EQ(entry(0)["source"], path("keep.txt"));
  EXPECT_EQ(entry(0)["entry"], "transformer.h.0.attn.scores");
  EXPECT_EQ(entry(0)["nodes"], 1);
  EXPECT_EQ(entry(1)["entry"], "OpType::SoftmaxV2");
  EXPECT_EQ(entry(1)["op_types"], json::array({"Softmax"}));
  EXPECT_EQ(entry(1)["nodes"], 2);
  EXPECT_EQ(entry(2)["nodes"], 0);
  EXPECT_EQ(entry(3)["setting"], "modify_mixlist");
  EXPECT_EQ(entry(3)["entry"], "white-list to-remove MatMulV2");
  EXPECT_EQ(entry(3)["op_types"], json::array({"MatMul"}));
  EXPECT_GT(entry(3)["nodes"].get<int>(), 0);
  EXPECT_EQ(entry(4)["setting"], "attention_fp32_layers");
  EXPECT_EQ(entry(4)["source"], "--attention-fp32-layers");
  EXPECT_EQ(entry(4)["entry"], "1");
  EXPECT_EQ(entry(4)["nodes"], 1);
  EXPECT_NE(r.out.find("keep_dtype OpType::Sigmoid (Sigmoid): 0 nodes"), std::string::npos)
      << r.out;
}

// CANN names in a keep_dtype file keep the kiln ops they stand for.
TEST_F(PrecisionCli, CannOpTypesInKeepDTypeAndMixlists) {
  write("keep.txt", "OpType::SoftmaxV2\n");
  // The forward graph: few enough decisions that the report lists them all.
  Result r = run("compile " + kTiny +
                 " --seq 8 --passes-only --precision-mode "
                 "allow_mix_precision --keep-dtype " +
                 path("keep.txt") +
                 " --disable-pass AttentionFp32CastPass,FlashAttentionFusionPass --report " +
                 path("r.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = json::parse(slurp(path("r.json")));
  int kept = 0;
  for (const json &p : report["passes"])
    if (p["name"] == "PrecisionModePass")
      for (const json &d : p["dtype_decisions"])
        kept += d["why"] == "keep_dtype" && d["node"].get<std::string>().ends_with("attn.softmax");
  EXPECT_EQ(kept, 2) << "both layers' Softmax";
  write("mix.json", R"({"black-list": {"to-add": ["BatchMatMulV2", "LayerNorm"]}})");
  EXPECT_EQ(compile("--precision-mode allow_mix_precision --modify-mixlist " + path("mix.json"))
                .exit_code,
            0);
  write("typo.json", R"({"black-list": {"to-add": ["SwishGard"]}})");
  expectRunError(
      compile("--precision-mode allow_mix_precision --modify-mixlist " + path("typo.json")),
      {"typo.json: $.black-list.to-add[0]: unknown op type 'SwishGard'", "did you mean SwishGrad"});
}

// CANN files SoftmaxFusionPass (kiln: UBFusion) under GraphFusion in some
// versions: the setting applies, with a note, not an error.
TEST_F(PrecisionCli, APassUnderTheOtherFusionGroupAppliesWithANote) {
  write("switch.json", R"({"Switch": {"GraphFusion": {"SoftmaxFusionPass": "off"}}})");
  Result r = compile("--fusion-switch-file " + path("switch.json") + " --report " + path("r.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("$.Switch.GraphFusion.SoftmaxFusionPass: SoftmaxFusionPass is a UBFusion "
                       "pass in kiln, listed under GraphFusion"),
            std::string::npos)
      << r.err;
  json report = json::parse(slurp(path("r.json")));
  for (const json &p : report["passes"])
    if (p["name"] == "SoftmaxFusionPass") {
      EXPECT_EQ(p["enabled"], false) << p.dump(2);
    }
}

TEST_F(PrecisionCli, ForceLowerPrecisionAndPrecisionModeV2) {
  Result lower = compile("--precision-mode force_lowerprecision --target ascend910");
  ASSERT_EQ(lower.exit_code, 0) << lower.err;
  EXPECT_NE(lower.out.find("force_lowerprecision"), std::string::npos) << lower.out;
  Result v2 = compile("--precision-mode-v2 mixed_float16");
  ASSERT_EQ(v2.exit_code, 0) << v2.err;
  EXPECT_NE(v2.out.find("allow_mix_precision_fp16"), std::string::npos) << v2.out;
  write("job.json", R"({"precision": {"precision_mode_v2": "cube_fp16in_fp32out"}})");
  Result job = compile("--job " + path("job.json"));
  ASSERT_EQ(job.exit_code, 0) << job.err;
  EXPECT_NE(job.out.find("force_fp32"), std::string::npos) << job.out;

  // bf16 on a chip without it: refused with the reason, naming the spelling used.
  expectUsageError(
      compile("--precision-mode-v2 mixed_bf16 --target ascend910"),
      {"--precision-mode-v2 mixed_bf16 (precision mode allow_mix_precision_bf16) needs "
       "bf16, which target ascend910 does not have"});
  write("bf16.json",
        R"({"target": "ascend910", "precision": {"precision_mode_v2": "mixed_bf16"}})");
  expectRunError(compile("--job " + path("bf16.json")),
                 {"bf16.json: $.precision.precision_mode_v2 \"mixed_bf16\"", "needs bf16"});

  // Mistakes.
  Result both = compile("--precision-mode force_fp16 --precision-mode-v2 fp16");
  EXPECT_EQ(both.exit_code, 2) << both.err;
  expectUsageError(compile("--precision-mode-v2 force_fp16"),
                   {"--precision-mode-v2", "force_fp16"});
  expectUsageError(compile("--precision-mode mixed_float16"),
                   {"--precision-mode", "is a --precision-mode-v2 value"});
  write("two.json",
        R"({"precision": {"precision_mode": "force_fp16", "precision_mode_v2": "fp16"}})");
  expectRunError(compile("--job " + path("two.json")),
                 {"two.json: $.precision.precision_mode_v2", "give only one"});
}

} // namespace
} // namespace kiln
