// What `kiln merge` runs, without the CLI: the merged folder holds the
// base weights with each adapted linear merged (as frontend's merge makes
// them) and the base config beside them; what the base file holds beyond
// the model is left out and named; nothing is written into the base
// model's own folder or from an adapter that is not finite.
#include <filesystem>
#include <limits>

#include <gtest/gtest.h>

#include "compiler/frontend/decoder_init.h"
#include "compiler/frontend/lora_adapter.h"
#include "formats/hf_checkpoint.h"
#include "formats/safetensors.h"
#include "session/adapter_merge.h"
#include "support/file_io.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/tiny_qwen.h"

namespace kiln::session {
namespace {

namespace fs = std::filesystem;

class AdapterMergeTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = testing::freshTestDir("kiln_merge_");
    config_ = testing::tinyQwenConfig();
    base_ = frontend::initDecoderWeights(config_, 0);
    SafetensorsFile file;
    file.tensors = base_;
    file.tensors["adam.m.extra"] = Tensor::fromFloats(DType::F32, Shape({2}), {1, 2});
    ASSERT_TRUE(writeSafetensors((dir_ / "base.safetensors").string(), file).isOk());
    frontend::LoraConfig lora;
    lora.rank = 4;
    lora.targets = {"c_attn"};
    auto adapter = frontend::startingAdapter(config_, "", lora, 3);
    ASSERT_TRUE(adapter.isOk()) << adapter.message();
    adapter_ = *adapter;
    for (auto &[name, t] : adapter_.tensors) // B is zero when fresh: merge something
      if (name.find("lora_B") != std::string::npos)
        t = Tensor::fromFloats(t.dtype(), t.shape(), std::vector<float>(t.numElements(), 0.5f));
  }
  void TearDown() override { fs::remove_all(dir_); }

  MergeRequest request() const {
    MergeRequest r;
    r.config = config_;
    r.config_path = testing::kTinyQwen;
    r.weights = (dir_ / "base.safetensors").string();
    r.adapter = (dir_ / "adapter").string();
    r.output = (dir_ / "merged").string();
    r.shard_bytes = int64_t{1} << 30;
    return r;
  }

  fs::path dir_;
  frontend::DecoderConfig config_;
  std::map<std::string, Tensor> base_;
  frontend::LoraAdapter adapter_;
};

TEST_F(AdapterMergeTest, TheFolderHoldsTheMergedWeightsAndTheBaseConfig) {
  ASSERT_TRUE(frontend::writeLoraAdapter((dir_ / "adapter").string(), adapter_).isOk());
  auto summary = mergeAdapter(request());
  ASSERT_TRUE(summary.isOk()) << summary.message();
  EXPECT_EQ(summary->adapted_layers, adapter_.tensors.size() / 2);
  EXPECT_EQ(summary->unused, std::vector<std::string>{"adam.m.extra"});
  EXPECT_EQ(summary->tensors, base_.size());
  EXPECT_EQ(readFile((dir_ / "merged" / "config.json").string()).value(),
            readFile(testing::kTinyQwen).value());
  auto written = readHfWeights((dir_ / "merged").string());
  ASSERT_TRUE(written.isOk()) << written.message();
  auto want = frontend::mergeLoraAdapter(config_, base_, adapter_, "base");
  ASSERT_TRUE(want.isOk()) << want.message();
  ASSERT_EQ(written->size(), want->size());
  for (const auto &[name, t] : *want)
    EXPECT_TRUE(written->at(name) == t) << name;
}

TEST_F(AdapterMergeTest, NothingIsWrittenIntoTheBaseFolderOrFromNonFiniteValues) {
  MergeRequest into_base = request();
  into_base.output = fs::path(testing::kTinyQwen).parent_path().string();
  ASSERT_TRUE(frontend::writeLoraAdapter((dir_ / "adapter").string(), adapter_).isOk());
  EXPECT_FALSE(mergeAdapter(into_base).isOk());
  EXPECT_FALSE(fs::exists(fs::path(into_base.output) / "model.safetensors"));

  frontend::LoraAdapter bad = adapter_;
  Tensor &b = bad.tensors.begin()->second;
  b = Tensor::fromFloats(
      b.dtype(), b.shape(),
      std::vector<float>(b.numElements(), std::numeric_limits<float>::quiet_NaN()));
  ASSERT_TRUE(frontend::writeLoraAdapter((dir_ / "adapter").string(), bad).isOk());
  EXPECT_FALSE(mergeAdapter(request()).isOk());
  EXPECT_FALSE(fs::exists(dir_ / "merged"));
}

} // namespace
} // namespace kiln::session
