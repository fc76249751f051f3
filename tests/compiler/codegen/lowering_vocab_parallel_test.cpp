// Compiled vocab-parallel ops (compiler/codegen/lowering/vocab_parallel.cpp) and Gather's
// skip_out_of_range against the reference interpreter. That the ranks' parts make the whole
// model's loss and gradients is tests/runtime/tensor_parallel_test.cpp's.
#include <gtest/gtest.h>

#include "ops/op_builder.h"
#include "tests/support/codegen_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

const DType kFloats[] = {DType::F32, DType::F16, DType::BF16};

Tensor rankTensor(int64_t rank) { return Tensor::fromInts(DType::I64, {}, {rank}); }

TEST(VocabParallelLowering, ShardIndexMapsIntoTheShardAndMarksTheRest) {
  for (DType index : {DType::I32, DType::I64})
    for (int64_t rank : {0, 1, 3}) {
      Tensor ids = Tensor::fromInts(index, {2, 5}, {0, 2, 3, 5, 6, 8, 11, 12, 1, 9});
      expectOpOnInputs("ShardIndex", {ids, rankTensor(rank)}, {{"shard_size", int64_t{3}}});
    }
  // Spot values: shard 1 of size 3 holds 3, 4 and 5.
  Graph g("shard");
  ValueId ids = g.addInput("ids", {DType::I64, {4}}, InputRole::Data);
  ValueId rank = g.addInput("rank", {DType::I64, {}}, InputRole::Data);
  ops::OpBuilder b(g);
  g.addOutput("local", b.create("ShardIndex", "s", {ids, rank}, {{"shard_size", int64_t{3}}}));
  ASSERT_TRUE(b.status()) << b.status().message();
  auto got = expectCompiledMatchesReference(
      g, {{"ids", Tensor::fromInts(DType::I64, {4}, {2, 3, 5, 6})}, {"rank", rankTensor(1)}});
  const Tensor &local = got.at("local");
  EXPECT_EQ(local.getInt(0), -1);
  EXPECT_EQ(local.getInt(1), 0);
  EXPECT_EQ(local.getInt(2), 2);
  EXPECT_EQ(local.getInt(3), -1);
}

TEST(VocabParallelLowering, GatherSkipsIndicesOutsideTheTable) {
  const AttrMap skip = {{"skip_out_of_range", true}};
  for (DType d : kFloats) {
    Tensor table = randomTensor({d, {5, 4}}, 3);
    Tensor ids = Tensor::fromInts(DType::I64, {2, 3}, {0, -1, 4, 5, 2, -7});
    expectOpOnInputs("Gather", {table, ids}, skip);
    Tensor dy = randomTensor({d, {2, 3, 4}}, 4);
    expectOpOnInputs("EmbeddingGrad", {dy, ids},
                     {{"num_rows", int64_t{5}}, {"skip_out_of_range", true}});
  }
}

// The statistics, the loss part and its gradient of rank 2 of 4, chained as the model
// chains them (without the collectives, which a group of one passes through): rows whose
// label another rank holds, rows labelled ignore_index, and a wide row. With `vocab`
// (a padded vocabulary's size) the columns of rank 2 past it are padding.
void expectLossChainMatches(DType d, int64_t n, int64_t v, uint64_t seed, int64_t vocab = 0) {
  const int64_t ranks = 4, ignore = -100;
  Graph g("vocab_parallel_loss");
  ValueId logits = g.addInput("logits", {d, {n, v}}, InputRole::Data);
  ValueId labels = g.addInput("labels", {DType::I64, {n}}, InputRole::Data);
  ValueId rank = g.addInput("rank", {DType::I64, {}}, InputRole::Data);
  ValueId dloss = g.addInput("dloss", {DType::F32, {}}, InputRole::Data);
  ops::OpBuilder b(g);
  AttrMap stat, attrs = {{"ranks", ranks}, {"ignore_index", ignore}};
  std::vector<ValueId> max_in = {logits};
  if (vocab > 0) {
    stat.set("vocab", vocab);
    attrs.set("vocab", vocab);
    max_in.push_back(rank);
  }
  ValueId max = b.create("VocabParallelMax", "max", max_in, stat);
  std::vector<ValueId> sum_in = {logits, max};
  if (vocab > 0)
    sum_in.push_back(rank);
  ValueId sum = b.create("VocabParallelSumExp", "sum", sum_in, stat);
  ValueId loss =
      b.create("VocabParallelCrossEntropy", "loss", {logits, labels, rank, max, sum}, attrs);
  ValueId dlogits = b.create("VocabParallelCrossEntropyGrad", "dlogits",
                             {logits, labels, rank, max, sum, dloss}, attrs);
  ASSERT_TRUE(b.status()) << b.status().message();
  g.addOutput("max", max);
  g.addOutput("sum", sum);
  g.addOutput("loss", loss);
  g.addOutput("dlogits", dlogits);
  Tensor label_values = randomIndices({DType::I64, {n}}, seed, vocab > 0 ? vocab : ranks * v);
  for (int64_t r = 0; r < n; r += 5)
    label_values.setInt(r, ignore);
  for (int64_t r = 1; r < n; r += 3)
    if (vocab == 0 || 2 * v + r % v < vocab)
      label_values.setInt(r, 2 * v + r % v); // held by rank 2
  expectCompiledMatchesReference(g, {{"logits", randomTensor({d, {n, v}}, seed, -4, 4)},
                                     {"labels", label_values},
                                     {"rank", rankTensor(2)},
                                     {"dloss", Tensor::fromFloats(DType::F32, {}, {0.75f})}});
}

TEST(VocabParallelLowering, LossChainMatchesReference) {
  for (DType d : kFloats) {
    SCOPED_TRACE(dtypeName(d));
    expectLossChainMatches(d, 12, 6, 1);
    expectLossChainMatches(d, 1, 1, 2);
  }
  expectLossChainMatches(DType::F32, 256, 160, 3);
}

// A padded vocabulary: rank 2 of 4 holds 3 real columns of 8, or none.
TEST(VocabParallelLowering, PaddingColumnsAreLeftOutAsTheReferenceLeavesThem) {
  for (DType d : kFloats) {
    SCOPED_TRACE(dtypeName(d));
    expectLossChainMatches(d, 12, 8, 4, 2 * 8 + 3);
    expectLossChainMatches(d, 12, 8, 5, 2 * 8);
  }
}

} // namespace
} // namespace kiln::testing
