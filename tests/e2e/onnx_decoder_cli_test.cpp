// A real export end to end (tests/e2e/onnx_decoder_fixture.h): compiled by
// kiln for ascend910b its logits and loss equal PyTorch's, the artifact of
// kiln compile -o runs, and the fusion and precision passes find their
// patterns in the imported graph as in kiln's own; on ascend910, whose cube
// takes f16 operands only, the f32 model is a coded error until a precision
// mode lowers its matmuls, and then runs as the reference interpreter does.
#include <gtest/gtest.h>

#include "tests/e2e/onnx_decoder_fixture.h"

namespace kiln::testing {
namespace {

using nlohmann::json;

TEST_F(OnnxDecoder, LogitsEqualPyTorchsAndTheArtifactRuns) {
  Result run = this->run(runModel("--outputs " + path("out.safetensors") + " --target ascend910b"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  expectNearTensors("expected.safetensors", "out.safetensors", 1e-5);

  json report = compileReport("--target ascend910b -o " + path("m.kiln"));
  EXPECT_EQ(effects(report, "FlashAttentionFusionPass"), 2) << "one fused attention per layer";
  EXPECT_EQ(effects(report, "SwiGluFusionRule"), 2) << "torch's x * sigmoid(x), one per layer";
  EXPECT_EQ(effects(report, "RotaryFusionRule"), 4) << "torch's rotate_half, q and k per layer";
  for (const char *name : {"MatMulBiasAddFusionPass", "RmsNormFusionPass",
                           "ATbeMatmulElemwiseFusionPass", "TbeEltwiseFusionPass"})
    EXPECT_GT(effects(report, name), 0) << name << " did not fire on the imported decoder";

  Result init = this->run("init " + path("model.onnx") + " --input-shape input_ids:2,8 -o " +
                          path("w.safetensors"));
  ASSERT_EQ(init.exit_code, 0) << init.err;
  Result artifact =
      this->run("run " + path("m.kiln") + " --weights " + path("w.safetensors") + " --inputs " +
                path("inputs.safetensors") + " --outputs " + path("out2.safetensors"));
  ASSERT_EQ(artifact.exit_code, 0) << artifact.err;
  expectNearTensors("expected.safetensors", "out2.safetensors", 1e-5);
}

// The passes CANN's recipes lean on, on the imported graph: FixPipe takes
// the casts out of the cube in a bf16 compile; where the attention is not
// fused (ascend910, or the pass off) AttentionFp32CastPass finds QK^T and
// the softmax and keeps them in f32, and the softmax fuses.
TEST_F(OnnxDecoder, FusionAndPrecisionPassesFindTheirPatterns) {
  json bf16 = compileReport("--target ascend910b --precision-mode allow_mix_precision_bf16");
  EXPECT_GT(effects(bf16, "TbeMatmulFixPipeFusionPass"), 0);
  EXPECT_EQ(effects(bf16, "FlashAttentionFusionPass"), 2);
  for (const json &left : pass(bf16, "AttentionFp32CastPass")["not_fused"])
    EXPECT_NE(left["reason"].get<std::string>().find("fused by FlashAttentionFusionPass"),
              std::string::npos)
        << left.dump();

  const std::string unfused = "--precision-mode allow_mix_precision_bf16 --disable-pass "
                              "FlashAttentionFusionPass";
  for (const std::string &flags :
       {"--target ascend910b " + unfused, std::string("--target ascend910 --precision-mode "
                                                      "allow_mix_precision")}) {
    json report = compileReport(flags);
    EXPECT_EQ(effects(report, "AttentionFp32CastPass"), 2) << flags;
    EXPECT_EQ(effects(report, "SoftmaxFusionPass"), 2) << flags;
    EXPECT_EQ(effects(report, "RmsNormFusionPass"), 5) << flags;
    EXPECT_GT(effects(report, "TbeEltwiseFusionPass"), 0) << flags;
    // Each layer's QK^T stores f32; its scale and mask compute in f32 (the
    // softmax is f32 already: a black-list op).
    size_t scores = 0;
    for (const json &d : pass(report, "AttentionFp32CastPass")["dtype_decisions"]) {
      const std::string node = d["node"];
      EXPECT_EQ(d["to"], "f32") << node;
      scores += node.ends_with("self_attn.MatMul");
    }
    EXPECT_EQ(scores, 2u) << flags;
  }
}

// ascend910's cube multiplies f16 operands only (target/data/ascend910.json,
// cube_input_dtypes): an f32 model's matmuls are E40005, and the next step
// names the precision modes that lower them. Under force_fp32 (CANN's
// cube_fp16in_fp32out: f16 into the cube, f32 out) the kernels give what
// the reference interpreter gives for the same job, and PyTorch's f32
// logits within what rounding the matmul operands to f16 costs.
TEST_F(OnnxDecoder, RunsOnAscend910WithTheCubeInF16) {
  Result f32 = run(runModel("--outputs " + path("o.safetensors") + " --target ascend910"));
  EXPECT_EQ(f32.exit_code, kExitError) << f32.err;
  EXPECT_NE(f32.err.find("E40005"), std::string::npos) << f32.err;
  EXPECT_NE(f32.err.find("--precision-mode force_fp32"), std::string::npos) << f32.err;

  const std::string job = " --target ascend910 --precision-mode force_fp32";
  Result kernels = run(runModel("--outputs " + path("o910.safetensors") + job));
  ASSERT_EQ(kernels.exit_code, 0) << kernels.err;
  Result reference = run(runModel("--outputs " + path("r910.safetensors") + job + " --reference"));
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  // An operand's rounding to f16 (2^-11 relative) may go the other way
  // after the kernels' f32 sums: a few elements then differ by about that.
  expectCloseTensors("r910.safetensors", "o910.safetensors", 1e-4);
  expectCloseTensors("expected.safetensors", "o910.safetensors", 2e-3);

  json report = compileReport(job + " -o " + path("m910.kiln"));
  EXPECT_EQ(pass(report, "FlashAttentionFusionPass")["applicable"], false);
  EXPECT_EQ(effects(report, "SoftmaxFusionPass"), 2);
  EXPECT_EQ(effects(report, "RmsNormFusionPass"), 5);
  EXPECT_GT(effects(report, "ATbeMatmulElemwiseFusionPass"), 0);
}

// The input shapes are part of the program cache key: a program compiled
// for [2, 8] is not taken for [4, 8].
TEST_F(OnnxDecoder, TheInputShapesArePartOfTheProgramKey) {
  json first = compileReport("");
  EXPECT_EQ(first["program_cache"]["hit"], false);
  EXPECT_EQ(compileReport("")["program_cache"]["hit"], true);
  Result wider = run("compile " + path("model.onnx") + " --input-shape input_ids:4,8 --report " +
                     path("wide.json"));
  ASSERT_EQ(wider.exit_code, 0) << wider.err;
  EXPECT_EQ(json::parse(slurp(path("wide.json")))["program_cache"]["hit"], false);
}

// The debug commands that run a model take an ONNX model's initializers as
// its weights, as kiln run does; a model without weights still needs them.
TEST_F(OnnxDecoder, DebugCommandsRunItOnItsOwnWeights) {
  const std::string model = path("model.onnx") + " --inputs " + path("inputs.safetensors");
  Result compare = run("debug compare " + model);
  ASSERT_EQ(compare.exit_code, 0) << compare.err;
  EXPECT_NE(compare.out.find("no value leaves the tolerance"), std::string::npos) << compare.out;
  Result overflow = run("debug overflow " + model);
  ASSERT_EQ(overflow.exit_code, 0) << overflow.err;
  EXPECT_NE(overflow.out.find("no kernel overflowed"), std::string::npos) << overflow.out;
  Result bisect = run("debug bisect " + model + " --check accuracy");
  ASSERT_EQ(bisect.exit_code, 0) << bisect.err;
  EXPECT_NE(bisect.out.find("nothing to bisect"), std::string::npos) << bisect.out;

  const std::string qwen =
      kSource + "/examples/qwen-small/config.json --inputs " + path("inputs.safetensors");
  for (const char *command : {"debug compare ", "debug overflow "}) {
    Result r = run(command + qwen);
    EXPECT_EQ(r.exit_code, kExitUsage) << command;
    EXPECT_NE(r.err.find("--weights is required"), std::string::npos) << command << r.err;
  }
}

// input_ids outside the vocabulary are an error naming the file and the
// value, compiled (whose kernels would clamp them and run on) as on the
// interpreter; a negative id counts from the end, as ONNX's Gather says.
TEST_F(OnnxDecoder, InputIdsOutsideTheVocabularyAreAnError) {
  auto inputs = readSafetensors(path("inputs.safetensors"));
  ASSERT_TRUE(inputs.isOk());
  Tensor &ids = inputs->tensors.at("input_ids");
  for (int64_t bad : {int64_t{5000}, int64_t{-5000}, int64_t{-1}}) {
    ids.setInt(3, bad);
    ASSERT_TRUE(writeSafetensors(path("ids.safetensors"), *inputs));
    for (const char *how : {"", " --reference"}) {
      Result r = run("run " + path("model.onnx") + " --inputs " + path("ids.safetensors") +
                     " --outputs " + path("o.safetensors") + how);
      if (bad == -1) {
        EXPECT_EQ(r.exit_code, 0) << how << r.err;
        continue;
      }
      EXPECT_EQ(r.exit_code, kExitError) << bad << how;
      EXPECT_NE(r.err.find("ids.safetensors: tensor 'input_ids': index " + std::to_string(bad) +
                           " at position 3 ([0, 3]) is outside [-"),
                std::string::npos)
          << how << r.err;
    }
  }
}

TEST_F(OnnxDecoder, AnUnboundDimensionNamesTheInput) {
  Result r = this->run("graph " + path("model.onnx") + " --format stats");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("graph input 'input_ids' dimension 1 ('seq') is symbolic"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--input-shape input_ids:"), std::string::npos) << r.err;
}

} // namespace
} // namespace kiln::testing
