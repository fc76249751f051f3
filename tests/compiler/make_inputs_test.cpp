// Random inputs for smoke runs, without the CLI: token ids uniform below
// the vocabulary and the same for the same seed, and an artifact's inputs
// refused for the other kind of step than it was compiled as.
#include <set>

#include <gtest/gtest.h>

#include "compiler/driver/artifact_run.h"
#include "compiler/frontend/random_init.h"

namespace kiln {
namespace {

TEST(RandomTokenIds, UniformBelowTheVocabularyAndFixedBySeed) {
  const Tensor ids = frontend::randomTokenIds(/*vocab=*/10, Shape({4, 50}), /*seed=*/3);
  EXPECT_EQ(ids.dtype(), DType::I64);
  EXPECT_EQ(ids.shape(), Shape({4, 50}));
  std::set<int64_t> seen;
  for (int64_t i = 0; i < 200; ++i) {
    ASSERT_GE(ids.getInt(i), 0);
    ASSERT_LT(ids.getInt(i), 10);
    seen.insert(ids.getInt(i));
  }
  EXPECT_EQ(seen.size(), 10u) << "200 draws reach every id of 10";
  EXPECT_TRUE(ids == frontend::randomTokenIds(10, Shape({4, 50}), 3));
  EXPECT_FALSE(ids == frontend::randomTokenIds(10, Shape({4, 50}), 4));
}

TEST(ArtifactInputs, AreRefusedForTheOtherKindOfStep) {
  artifact::Artifact a;
  a.source = "train.kiln";
  a.manifest.model.path = "config.json";
  a.manifest.model.training = true;
  driver::ArtifactInputsRequest request;
  request.training = false;
  auto forward = driver::makeArtifactInputs(a, request);
  ASSERT_FALSE(forward.isOk());
  EXPECT_EQ(forward.message().rfind("train.kiln: ", 0), 0u) << "names the artifact";
  a.manifest.model.training = false;
  request.training = true;
  EXPECT_FALSE(driver::makeArtifactInputs(a, request).isOk());
}

} // namespace
} // namespace kiln
