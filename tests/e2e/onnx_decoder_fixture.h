// The fixture of the ONNX decoder tests: a Llama/Qwen2-style decoder in
// plain torch.nn (tests/e2e/onnx/tiny_decoder.py) exported by Debian's
// PyTorch (python3-torch, which scripts/setup.sh installs) with dynamic
// batch and sequence axes, its logits and cross-entropy loss as outputs,
// and torch's logits, loss and autograd gradients beside it. The model is
// exported by each test, not checked in, so the tests follow the exporter
// Debian ships.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/e2e/cli_fixture.h"

namespace kiln::testing {

class OnnxDecoder : public Cli {
protected:
  void SetUp() override {
    Cli::SetUp();
    const std::string script = kSource + "/tests/e2e/onnx/tiny_decoder.py";
    Result r = shell("/usr/bin/python3 " + script + " " + path("") + " --batch 2 --seq 8 --grads");
    ASSERT_EQ(r.exit_code, 0) << "exporting with torch (python3-torch, installed by "
                                 "scripts/setup.sh --deps-only) failed: "
                              << r.err;
  }

  // Every tensor of `want` is in `got`, of its type, each element within
  // `rtol` of the largest magnitude in `want`'s tensor.
  void expectCloseTensors(const std::string &want, const std::string &got, double rtol) const {
    auto a = readSafetensors(path(want));
    auto b = readSafetensors(path(got));
    ASSERT_TRUE(a.isOk() && b.isOk()) << want << ", " << got;
    for (const auto &[name, w] : a->tensors) {
      auto it = b->tensors.find(name);
      ASSERT_NE(it, b->tensors.end()) << got << ": no " << name;
      const Tensor &g = it->second;
      ASSERT_EQ(g.type(), w.type()) << got << ": " << name;
      double scale = 0, worst = 0;
      for (int64_t k = 0; k < w.numElements(); ++k) {
        scale = std::max(scale, std::abs(double(w.getFloat(k))));
        worst = std::max(worst, std::abs(double(g.getFloat(k)) - w.getFloat(k)));
      }
      EXPECT_LE(worst, rtol * scale + 1e-12)
          << got << ": " << name << " (largest magnitude " << scale << ")";
    }
  }

  // `kiln compile model.onnx` at [2, 8] with `flags`; its report.
  nlohmann::json compileReport(const std::string &flags) {
    Result r = run("compile " + path("model.onnx") + " --input-shape input_ids:2,8 --report " +
                   path("report.json") + " " + flags);
    EXPECT_EQ(r.exit_code, 0) << flags << ": " << r.err;
    return nlohmann::json::parse(slurp(path("report.json")));
  }

  static const nlohmann::json &pass(const nlohmann::json &report, const std::string &name) {
    for (const nlohmann::json &p : report["passes"])
      if (p["name"] == name)
        return p;
    static const nlohmann::json none = nlohmann::json::object();
    ADD_FAILURE() << "no pass " << name << " in the report";
    return none;
  }
  static int64_t effects(const nlohmann::json &report, const std::string &name) {
    return pass(report, name).value("effect_times", int64_t{-1});
  }

  std::string runModel(const std::string &flags) const {
    return "run " + path("model.onnx") + " --inputs " + path("inputs.safetensors") + " " + flags;
  }
};

} // namespace kiln::testing
