// kiln debug overflow on examples/overflow: it names the QK^T of the layer
// that overflows, dumps its inputs and outputs, and suggests the pass.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ir/safetensors.h"
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
               path("i.st") + " --training " + flags);
  }
  std::string cfg_;
};

TEST_F(DebugOverflow, NamesTheAttentionScoresOfLayerZero) {
  Result r = debug("--precision-mode allow_mix_precision --disable-pass AttentionFp32CastPass "
                   "--format json --dump-dir " +
                   path("dump"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = json::parse(r.out);
  ASSERT_EQ(report["found"], true);
  EXPECT_EQ(report["op"]["name"], "transformer.h.0.attn.scores");
  EXPECT_EQ(report["op"]["op"], "BatchMatMul");
  EXPECT_EQ(report["op"]["backward"], false);
  EXPECT_GT(report["op"]["outputs"][0]["inf"].get<int64_t>(), 0);
  EXPECT_EQ(report["op"]["inputs"][0]["inf"], 0) << "its inputs were finite";
  EXPECT_EQ(report["op"]["inputs"][0]["type"], "f16[2,4,16,16]");
  EXPECT_NE(report["suggestions"][0].get<std::string>().find("AttentionFp32CastPass is off"),
            std::string::npos);
  auto dump = readSafetensors(report["dump"].get<std::string>());
  ASSERT_TRUE(dump.isOk()) << dump.message();
  EXPECT_EQ(dump->tensors.size(), 3u); // q, k and the scores
  EXPECT_EQ(dump->metadata["op"], "transformer.h.0.attn.scores");
}

TEST_F(DebugOverflow, UnfusedF16ModelNamesTheSameOp) {
  Result r = debug("--dtype f16 --disable-pass AttentionFp32CastPass --disable-pass "
                   "ATbeMatmulElemwiseFusionPass");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("op transformer.h.0.attn.scores (BatchMatMul), forward"), std::string::npos)
      << r.out;
}

TEST_F(DebugOverflow, WithThePassOnNothingOverflows) {
  Result r = debug("--precision-mode allow_mix_precision");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("no kernel produced inf or nan", 0), 0u) << r.out;
}

TEST_F(DebugOverflow, MissingInputsAreOneLineErrors) {
  Result r =
      run("debug overflow " + cfg_ + " --weights " + path("nope.st") + " --inputs " + path("i.st"));
  expectError(r, {"nope.st"});
}

} // namespace
} // namespace kiln
