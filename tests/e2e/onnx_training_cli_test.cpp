// Training an imported graph (tests/e2e/onnx_decoder_fixture.h): kiln run
// model.onnx --training --loss NAME differentiates the output NAME with
// respect to every float initializer, checked against PyTorch's autograd
// on the same exported model on both targets; kiln compile --training
// --loss writes the whole step as an artifact; a NAME that is not a scalar
// float output is an error listing the outputs.
#include <gtest/gtest.h>

#include "formats/safetensors.h"
#include "tests/e2e/onnx_decoder_fixture.h"

namespace kiln::testing {
namespace {

using nlohmann::json;

size_t tensorCount(const std::string &file) {
  auto read = readSafetensors(file);
  return read ? read->tensors.size() : 0;
}

// f32 on ascend910b: the outputs and every initializer's gradient within
// 1e-5 of PyTorch's, with the attention fused (FlashAttentionScoreGrad).
TEST_F(OnnxDecoder, GradientsEqualPyTorchAutogradsOnAscend910b) {
  Result r = run(runModel("--outputs " + path("g.safetensors") +
                          " --training --loss loss --target ascend910b"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("loss "), std::string::npos) << r.out;
  expectCloseTensors("expected.safetensors", "g.safetensors", 1e-5);
  expectCloseTensors("grads.safetensors", "g.safetensors", 1e-5);
  EXPECT_EQ(tensorCount(path("g.safetensors")),
            tensorCount(path("expected.safetensors")) + tensorCount(path("grads.safetensors")))
      << "the model's outputs and a gradient per float initializer, nothing else";
}

// ascend910 multiplies f16 operands only (RunsOnAscend910WithTheCubeInF16):
// under force_fp32 the kernels' gradients are the reference interpreter's
// for the same job, and PyTorch's within the rounding of the operands.
TEST_F(OnnxDecoder, GradientsOnAscend910WithTheCubeInF16) {
  const std::string job = " --training --loss loss --target ascend910 --precision-mode force_fp32";
  Result kernels = run(runModel("--outputs " + path("g910.safetensors") + job));
  ASSERT_EQ(kernels.exit_code, 0) << kernels.err;
  Result reference = run(runModel("--outputs " + path("r910.safetensors") + job + " --reference"));
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  // The backward rounds more operands to f16 (2^-11 relative), and a few
  // of those roundings may go the other way after the kernels' f32 sums.
  expectCloseTensors("r910.safetensors", "g910.safetensors", 2e-3);
  expectCloseTensors("grads.safetensors", "g910.safetensors", 5e-3);
  expectCloseTensors("expected.safetensors", "g910.safetensors", 2e-3);
}

// kiln compile --training --loss: the whole step (forward, backward, AdamW)
// with fused kernels, as an artifact kiln run runs; its loss is PyTorch's.
TEST_F(OnnxDecoder, TheTrainingStepCompilesToAnArtifactThatRuns) {
  json report = compileReport("--training --loss loss -o " + path("train.kiln"));
  EXPECT_EQ(effects(report, "FlashAttentionFusionPass"), 2);
  EXPECT_EQ(effects(report, "SwiGluFusionRule"), 2);
  EXPECT_EQ(effects(report, "SwiGluGradFusionRule"), 2);
  EXPECT_EQ(effects(report, "RotaryFusionRule"), 4);
  EXPECT_EQ(effects(report, "RotaryGradFusionRule"), 4);
  for (const char *name : {"RmsNormFusionPass", "ATbeMatmulElemwiseFusionPass",
                           "TbeEltwiseFusionPass", "MatMulBiasAddFusionPass"})
    EXPECT_GT(effects(report, name), 0) << name;

  ASSERT_EQ(
      run("init " + path("model.onnx") + " --input-shape input_ids:2,8 -o " + path("w.safetensors"))
          .exit_code,
      0);
  Result made =
      run("make-inputs " + path("train.kiln") + " --training -o " + path("step0.safetensors"));
  ASSERT_EQ(made.exit_code, 0) << made.err;
  // PyTorch's tokens, with the first step's AdamW state kiln wrote.
  auto step = readSafetensors(path("step0.safetensors"));
  auto ids = readSafetensors(path("inputs.safetensors"));
  ASSERT_TRUE(step && ids);
  step->tensors["input_ids"] = ids->tensors.at("input_ids");
  ASSERT_TRUE(writeSafetensors(path("step.safetensors"), *step).isOk());

  Result r = run("run " + path("train.kiln") + " --training --weights " + path("w.safetensors") +
                 " --inputs " + path("step.safetensors") + " --outputs " + path("o.safetensors"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto out = readSafetensors(path("o.safetensors"));
  auto want = readSafetensors(path("expected.safetensors"));
  ASSERT_TRUE(out && want);
  ASSERT_TRUE(out->tensors.count("loss") && out->tensors.count("norm.weight"));
  EXPECT_NEAR(out->tensors.at("loss").getFloat(0), want->tensors.at("loss").getFloat(0), 1e-5);
}

TEST_F(OnnxDecoder, TheLossMustBeAScalarFloatOutput) {
  const std::string out = "--outputs " + path("o.safetensors");
  expectUsageError(run(runModel(out + " --training")), {"--loss NAME", "ONNX model"});
  expectUsageError(run(runModel(out + " --loss loss")), {"--loss 'loss'", "add --training"});
  expectUsageError(run("compile " + kTiny + " --training --loss loss"),
                   {"--loss 'loss'", "not an ONNX model"});
  const std::string graph = "graph " + path("model.onnx") + " --input-shape input_ids:2,8 ";
  expectUsageError(run(graph + "--training"), {"--loss NAME"});
  Result stats = run(graph + "--training --loss loss --format stats");
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_GT(json::parse(stats.out)["ops"].value("AdamW", 0), 0) << "the whole step";

  expectRunError(run(runModel(out + " --training --loss logits")),
                 {"--loss 'logits'", "f32[2,8,64]", "scalar float",
                  "its outputs: logits f32[2,8,64], loss f32[]"});
  expectRunError(run(runModel(out + " --training --loss nope")),
                 {"model.onnx", "no output named 'nope'", "its outputs: logits"});
  Result r = run("compile " + path("model.onnx") +
                 " --input-shape input_ids:2,8 --training --loss nope --report " + path("r.json"));
  EXPECT_EQ(r.exit_code, kExitError) << r.err;
  EXPECT_EQ(json::parse(slurp(path("r.json")))["error"]["code"], "E12030");
}

} // namespace
} // namespace kiln::testing
