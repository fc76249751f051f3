// The step's inputs on their own: a replica's micro-batch is its share of
// the global batch that token_data.h draws for the step, whatever the
// layout; the loss scale is the one given; dropout's seed is new every
// step, replica and micro-batch and follows the run's seed, which a resumed
// run takes from its checkpoint.
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "runtime/batch_feed.h"

namespace kiln::runtime {
namespace {

constexpr int64_t kSeq = 8;

TokenData tokens() {
  std::string bytes;
  for (int i = 0; i < 2000; ++i) {
    const uint16_t t = static_cast<uint16_t>((i * 7 + 3) % 100);
    bytes.push_back(static_cast<char>(t & 0xff));
    bytes.push_back(static_cast<char>(t >> 8));
  }
  auto data = TokenData::parse(bytes, "train.bin", TokenDType::U16, 100, kSeq);
  EXPECT_TRUE(data.isOk()) << data.message();
  return std::move(*data);
}

parallel::TrainingSignature signature(bool dropout) {
  parallel::TrainingSignature s;
  s.loss_scale = "loss_scale";
  if (dropout)
    s.dropout_seed = "dropout_seed";
  return s;
}

TEST(BatchFeed, AMicroBatchIsItsShareOfTheStepsGlobalBatch) {
  const TokenData data = tokens();
  // Two replicas of 4 sequences in micro-batches of 2, against one replica of 8.
  const BatchFeed two(data, signature(false), /*batch_per_replica=*/4, /*micro_batch=*/2, 42);
  const BatchFeed one(data, signature(false), 8, 8, 42);
  const Tensor global = one.microBatch(/*step=*/3, 0, 0, 1.0).at("input_ids");
  ASSERT_EQ(global.shape(), Shape({8, kSeq}));
  for (int replica = 0; replica < 2; ++replica)
    for (int k = 0; k < 2; ++k) {
      const ops::TensorMap in = two.microBatch(3, replica, k, 1024.0);
      const int64_t first = replica * 4 + k * 2;
      EXPECT_TRUE(in.at("input_ids") == data.batch(42, 3, first, 2));
      EXPECT_TRUE(in.at("labels") == in.at("input_ids")) << "the model shifts the labels";
      for (int64_t row = 0; row < 2; ++row)
        for (int64_t j = 0; j < kSeq; ++j)
          EXPECT_EQ(in.at("input_ids").getInt(row * kSeq + j),
                    global.getInt((first + row) * kSeq + j));
      EXPECT_EQ(in.at("loss_scale").getFloat(0), 1024.0);
      EXPECT_EQ(in.count("dropout_seed"), 0u) << "no dropout, no seed";
    }
  EXPECT_FALSE(two.microBatch(4, 0, 0, 1.0).at("input_ids") ==
               two.microBatch(3, 0, 0, 1.0).at("input_ids"))
      << "another step draws other sequences";
}

TEST(BatchFeed, DropoutSeedsDifferPerStepReplicaAndMicroBatch) {
  const TokenData data = tokens();
  BatchFeed feed(data, signature(true), 4, 2, 7);
  std::set<int64_t> seeds;
  for (int64_t step = 0; step < 3; ++step)
    for (int replica = 0; replica < 2; ++replica)
      for (int k = 0; k < 2; ++k)
        seeds.insert(feed.microBatch(step, replica, k, 1.0).at("dropout_seed").getInt(0));
  EXPECT_EQ(seeds.size(), 3u * 2 * 2);
  const int64_t before = feed.microBatch(1, 1, 1, 1.0).at("dropout_seed").getInt(0);
  EXPECT_EQ(feed.microBatch(1, 1, 1, 4.0).at("dropout_seed").getInt(0), before)
      << "the same site draws the same mask";
  feed.reseed(8);
  EXPECT_EQ(feed.seed(), 8u);
  EXPECT_NE(feed.microBatch(1, 1, 1, 1.0).at("dropout_seed").getInt(0), before);
  feed.reseed(7);
  EXPECT_EQ(feed.microBatch(1, 1, 1, 1.0).at("dropout_seed").getInt(0), before)
      << "a resumed run with the checkpoint's seed draws what the first did";
}

} // namespace
} // namespace kiln::runtime
