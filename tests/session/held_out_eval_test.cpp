// What `kiln eval` runs, without the CLI: the tiny Qwen's forward over the
// windows of a token file, as many as fit whole batches (capped by
// max_tokens), with a finite loss whose exponent is the perplexity; a
// missing file, or a cap below one batch, is an error naming the file.
#include "session/held_out_eval.h"

#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "compiler/frontend/decoder_init.h"
#include "formats/safetensors.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/tiny_qwen.h"

namespace kiln::session {
namespace {

namespace fs = std::filesystem;

class HeldOutEvalTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = testing::freshTestDir("kiln_eval_");
    config_ = testing::tinyQwenConfig();
    SafetensorsFile weights;
    weights.tensors = frontend::initDecoderWeights(config_, 0);
    ASSERT_TRUE(writeSafetensors((dir_ / "w.safetensors").string(), weights).isOk());
    std::vector<uint16_t> tokens(1000);
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = static_cast<uint16_t>((i * 5 + 3) % 512);
    testing::writeTokenFile(dir_ / "eval.bin", tokens);
    job_.emplace(testing::defaultJob());
  }

  HeldOutEval eval(int64_t max_tokens) const {
    HeldOutEval e;
    e.request.model.model = testing::kTinyQwen;
    e.request.model.batch = 2;
    e.request.model.seq = 16;
    e.request.weights_path = (dir_ / "w.safetensors").string();
    e.data = (dir_ / "eval.bin").string();
    e.max_tokens = max_tokens;
    e.kernels.dir = (dir_ / "cache").string();
    return e;
  }

  fs::path dir_;
  frontend::DecoderConfig config_;
  std::optional<driver::ResolvedJob> job_;
};

TEST_F(HeldOutEvalTest, ReadsWholeBatchesOfWindowsUpToTheCap) {
  auto capped = evaluateHeldOut(eval(200), config_, *job_);
  ASSERT_TRUE(capped.isOk()) << capped.message();
  EXPECT_EQ(capped->windows, 12) << "200 tokens hold 12 windows of 16, six batches of 2";
  EXPECT_EQ(capped->tokens, 12 * 16);
  EXPECT_TRUE(std::isfinite(capped->loss));
  EXPECT_NEAR(capped->perplexity, std::exp(capped->loss), 1e-9 * capped->perplexity);
  EXPECT_FALSE(capped->overflow);
  auto all = evaluateHeldOut(eval(0), config_, *job_);
  ASSERT_TRUE(all.isOk()) << all.message();
  EXPECT_EQ(all->windows, 62) << "1000 tokens: 62 whole windows, 31 batches";
}

TEST_F(HeldOutEvalTest, AMissingFileOrACapBelowOneBatchNamesTheFile) {
  HeldOutEval missing = eval(0);
  missing.data = (dir_ / "none.bin").string();
  auto none = evaluateHeldOut(missing, config_, *job_);
  ASSERT_FALSE(none.isOk());
  EXPECT_NE(none.message().find(missing.data), std::string::npos);
  auto small = evaluateHeldOut(eval(20), config_, *job_);
  ASSERT_FALSE(small.isOk()) << "20 tokens hold one window, not a batch of 2";
  EXPECT_NE(small.message().find("eval.bin"), std::string::npos);
}

} // namespace
} // namespace kiln::session
