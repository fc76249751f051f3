// Finding NaN and inf in tensors: every float format's bits, the first bad
// element past the scan's blocks, integer tensors never flagged, and
// readHfWeights's per-file check naming the shard that holds one.
#include <cmath>
#include <filesystem>
#include <limits>
#include <unistd.h>

#include <gtest/gtest.h>

#include "formats/hf_checkpoint.h"
#include "ir/finite_values.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(FiniteValues, FindsTheFirstNaNOrInfInEveryFloatFormat) {
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(std::string(dtypeName(dtype)));
    Tensor t(TensorType{dtype, {1000}});
    // The largest finite value and the smallest subnormal are finite.
    t.setFloat(0, dtype == DType::F16 ? 65504.0f : 3e38f, OverflowMode::InfNan);
    t.setFloat(1, std::numeric_limits<float>::denorm_min(), OverflowMode::InfNan);
    EXPECT_EQ(firstNonFiniteElement(t), std::nullopt);
    for (float bad : {kNaN, kInf, -kInf}) {
      Tensor copy = t;
      copy.setFloat(700, bad, OverflowMode::InfNan);
      copy.setFloat(900, kNaN, OverflowMode::InfNan);
      EXPECT_EQ(firstNonFiniteElement(copy), std::optional<int64_t>(700)) << bad;
    }
  }
}

TEST(FiniteValues, IntegerTensorsAreNeverFlagged) {
  EXPECT_EQ(firstNonFiniteElement(Tensor::fromInts(DType::I32, {2}, {0x7f800000, -1})),
            std::nullopt);
}

TEST(FiniteValues, TheErrorNamesTheFileTheTensorAndTheElement) {
  std::map<std::string, Tensor> tensors;
  tensors["a"] = Tensor::fromFloats(DType::F32, {3}, {1, 2, 3});
  tensors["b"] = Tensor::fromFloats(DType::BF16, {3}, {1, -kInf, kNaN});
  tensors["c"] = Tensor::fromFloats(DType::F16, {2}, {kNaN, 0});
  EXPECT_TRUE(refuseNonFinite({{"a", tensors["a"]}}, "w.st", "why"));
  Status refused = refuseNonFinite(tensors, "w.st", "why");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.message(), "w.st: tensor 'b' element 1 is -inf (and 1 more tensor holds NaN "
                               "or inf, the next 'c'): why");
}

TEST(FiniteValues, ReadHfWeightsChecksEachShardAsItReadsIt) {
  const fs::path dir = fs::temp_directory_path() / ("kiln_finite_" + std::to_string(::getpid()));
  std::map<std::string, Tensor> tensors;
  for (const char *name : {"a", "b", "c"})
    tensors[name] = Tensor::fromFloats(DType::F32, {64}, std::vector<float>(64, 1.0f));
  tensors["c"].setFloat(5, kNaN, OverflowMode::InfNan);
  auto files = writeHfWeights(dir.string(), tensors, 300); // one tensor a shard
  ASSERT_TRUE(files.isOk()) << files.message();
  ASSERT_EQ(files->size(), 4u); // three shards and the index
  auto read = readHfWeights(dir.string(), [](const std::string &file, const auto &shard) {
    return refuseNonFinite(shard, file, "refused");
  });
  ASSERT_FALSE(read.isOk());
  EXPECT_EQ(read.message(), (dir / "model-00003-of-00003.safetensors").string() +
                                ": tensor 'c' element 5 is nan: refused");
  EXPECT_TRUE(readHfWeights(dir.string()).isOk()); // no check given: read as it is
  fs::remove_all(dir);
}

} // namespace
} // namespace kiln
