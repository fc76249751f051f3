// Hugging Face checkpoint layouts: a single file, shards plus their index,
// the folder holding either, and every broken index the reader must refuse.
#include <filesystem>
#include <string>
#include <unistd.h>

#include <gtest/gtest.h>

#include "formats/hf_checkpoint.h"
#include "formats/safetensors.h"
#include "support/file_io.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

class HfCheckpointTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kiln-hf-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // Three 1 KiB tensors of three dtypes.
    tensors_["a.weight"] = Tensor::fromFloats(DType::F32, {16, 16}, std::vector<float>(256, 1.5f));
    tensors_["b.weight"] = Tensor::fromFloats(DType::F16, {512}, std::vector<float>(512, -2.0f));
    tensors_["c.weight"] = Tensor::fromFloats(DType::BF16, {8, 64}, std::vector<float>(512, 0.25f));
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string &name) const { return (dir_ / name).string(); }
  void writeText(const std::string &name, const std::string &text) {
    ASSERT_TRUE(writeFileAtomic(path(name), text).isOk());
  }
  // Three shards of one tensor each, and the index.
  void writeSharded() {
    auto files = writeHfWeights(dir_.string(), tensors_, 1024);
    ASSERT_TRUE(files.isOk()) << files.error().message();
    ASSERT_EQ(files->size(), 4u);
  }
  void expectError(const std::string &what, const std::vector<std::string> &fragments) {
    auto read = readHfWeights(what);
    ASSERT_FALSE(read.isOk()) << "accepted " << what;
    for (const std::string &f : fragments)
      EXPECT_NE(read.error().message().find(f), std::string::npos)
          << "'" << f << "' not in: " << read.error().message();
  }

  fs::path dir_;
  std::map<std::string, Tensor> tensors_;
};

void expectSameTensors(const std::map<std::string, Tensor> &got,
                       const std::map<std::string, Tensor> &want) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto &[name, t] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_TRUE(got.at(name) == t) << name;
  }
}

TEST_F(HfCheckpointTest, SmallTensorsMakeOneFile) {
  auto files = writeHfWeights(dir_.string(), tensors_, 1 << 20);
  ASSERT_TRUE(files.isOk());
  EXPECT_EQ(*files, std::vector<std::string>{path(kHfWeightsFile)});
  for (const std::string &p : {dir_.string(), path(kHfWeightsFile)}) {
    auto read = readHfWeights(p);
    ASSERT_TRUE(read.isOk()) << read.error().message();
    expectSameTensors(*read, tensors_);
  }
}

TEST_F(HfCheckpointTest, ShardsAndIndexRoundTripFromTheIndexOrTheFolder) {
  writeSharded();
  EXPECT_TRUE(fs::exists(path("model-00003-of-00003.safetensors")));
  auto index = readJsonFile(path(kHfWeightsIndex));
  ASSERT_TRUE(index.isOk());
  EXPECT_EQ((*index)["metadata"]["total_size"], 3 * 1024);
  EXPECT_EQ((*index)["weight_map"]["b.weight"], "model-00002-of-00003.safetensors");
  for (const std::string &p : {dir_.string(), path(kHfWeightsIndex)}) {
    auto read = readHfWeights(p);
    ASSERT_TRUE(read.isOk()) << read.error().message();
    expectSameTensors(*read, tensors_);
  }
}

TEST_F(HfCheckpointTest, RewritingAsOneFileDropsTheOldIndex) {
  writeSharded();
  ASSERT_TRUE(writeHfWeights(dir_.string(), tensors_, 1 << 20).isOk());
  EXPECT_FALSE(fs::exists(path(kHfWeightsIndex)));
  auto read = readHfWeights(dir_.string());
  ASSERT_TRUE(read.isOk());
  expectSameTensors(*read, tensors_);
}

TEST_F(HfCheckpointTest, MissingShardIsNamed) {
  writeSharded();
  fs::remove(path("model-00002-of-00003.safetensors"));
  expectError(dir_.string(), {kHfWeightsIndex, "shard 'model-00002-of-00003.safetensors'",
                              "'b.weight'", "missing"});
}

TEST_F(HfCheckpointTest, TensorListedButAbsentFromItsShard) {
  writeSharded();
  SafetensorsFile other;
  other.tensors["z.weight"] = tensors_["b.weight"];
  ASSERT_TRUE(writeSafetensors(path("model-00002-of-00003.safetensors"), other).isOk());
  expectError(path(kHfWeightsIndex),
              {"model-00002-of-00003.safetensors", "no tensor 'b.weight'", "places in this shard"});
}

TEST_F(HfCheckpointTest, TensorInTwoShardsIsADuplicate) {
  writeSharded();
  SafetensorsFile both;
  both.tensors["a.weight"] = tensors_["a.weight"];
  both.tensors["b.weight"] = tensors_["b.weight"];
  ASSERT_TRUE(writeSafetensors(path("model-00002-of-00003.safetensors"), both).isOk());
  expectError(path(kHfWeightsIndex), {"tensor 'a.weight' is also in shard", "once"});
}

TEST_F(HfCheckpointTest, ShardNamesMayNotLeaveTheFolder) {
  writeText(kHfWeightsIndex, R"({"weight_map": {"a.weight": "../elsewhere.safetensors"}})");
  expectError(path(kHfWeightsIndex), {"weight_map['a.weight']", "in the index's folder"});
  writeText(kHfWeightsIndex, R"({"weight_map": {"a.weight": 7}})");
  expectError(path(kHfWeightsIndex), {"weight_map['a.weight']"});
  writeText(kHfWeightsIndex, R"({"weights": {}})");
  expectError(path(kHfWeightsIndex), {"\"weight_map\""});
}

TEST_F(HfCheckpointTest, FolderWithoutWeightsSaysWhatItNeeds) {
  expectError(dir_.string(), {kHfWeightsFile, kHfWeightsIndex, "neither"});
}

TEST_F(HfCheckpointTest, IndexIsNotMistakenForSafetensors) {
  writeSharded();
  // The index given where a safetensors file was expected before: read as an
  // index, not as a header length of 7017841271895827067 bytes.
  auto read = readHfWeights(path(kHfWeightsIndex));
  ASSERT_TRUE(read.isOk()) << read.error().message();
}

} // namespace
} // namespace kiln
