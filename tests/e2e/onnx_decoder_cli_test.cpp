// A real export end to end: a Llama/Qwen2-style decoder written in plain
// torch.nn (tests/e2e/onnx/tiny_decoder.py), exported by Debian's PyTorch
// (python3-torch, which scripts/setup.sh installs) with dynamic batch and
// sequence axes, compiled by kiln for ascend910b: its logits equal PyTorch's,
// the fusion passes fire on the imported graph, and the artifact of
// kiln compile -o runs with kiln run. The model is exported by the test, not
// checked in, so the test follows the exporter Debian ships.
#include <gtest/gtest.h>

#include <map>

#include "tests/e2e/cli_fixture.h"

namespace kiln {
namespace {

using testing::Result;
using testing::slurp;

class OnnxDecoder : public testing::Cli {
protected:
  void SetUp() override {
    Cli::SetUp();
    const std::string script = std::string(KILN_SOURCE_DIR) + "/tests/e2e/onnx/tiny_decoder.py";
    Result r = shell("/usr/bin/python3 " + script + " " + path("") + " --batch 2 --seq 8");
    ASSERT_EQ(r.exit_code, 0) << "exporting with torch (python3-torch, installed by "
                                 "scripts/setup.sh --deps-only) failed: "
                              << r.err;
  }
};

TEST_F(OnnxDecoder, LogitsEqualPyTorchsAndTheArtifactRuns) {
  Result run = this->run("run " + path("model.onnx") + " --inputs " + path("inputs.safetensors") +
                         " --outputs " + path("out.safetensors") + " --target ascend910b");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  expectNearTensors("expected.safetensors", "out.safetensors", 1e-5);

  Result compiled = this->run("compile " + path("model.onnx") +
                              " --input-shape input_ids:2,8 --target ascend910b --report " +
                              path("report.json") + " -o " + path("m.kiln"));
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  auto report = nlohmann::json::parse(slurp(path("report.json")));
  std::map<std::string, int> effects;
  for (const auto &pass : report["passes"])
    effects[pass["name"].get<std::string>()] = pass["effect_times"].get<int>();
  for (const char *pass : {"MatMulBiasAddFusionPass", "RmsNormFusionPass", "SoftmaxFusionPass",
                           "ATbeMatmulElemwiseFusionPass", "TbeEltwiseFusionPass"})
    EXPECT_GT(effects[pass], 0) << pass << " did not fire on the imported decoder";

  Result init = this->run("init " + path("model.onnx") + " --input-shape input_ids:2,8 -o " +
                          path("w.safetensors"));
  ASSERT_EQ(init.exit_code, 0) << init.err;
  Result artifact =
      this->run("run " + path("m.kiln") + " --weights " + path("w.safetensors") + " --inputs " +
                path("inputs.safetensors") + " --outputs " + path("out2.safetensors"));
  ASSERT_EQ(artifact.exit_code, 0) << artifact.err;
  expectNearTensors("expected.safetensors", "out2.safetensors", 1e-5);
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
} // namespace kiln
