// The trainer's gradient sums on their own: micro-batches add up in f32
// from any dtype, a gradient kept in its dtype stays so until the sum over
// the replicas, which casts it exactly and leaves every replica the total.
#include <gtest/gtest.h>

#include "runtime/communicator.h"
#include "runtime/gradient_sums.h"

namespace kiln::runtime {
namespace {

Tensor values(DType dtype, std::vector<float> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::fromFloats(dtype, Shape({n}), v);
}

TEST(GradientSums, MicroBatchesAddUpInF32) {
  GradientSums sums;
  sums.reset(/*devices=*/2, /*params=*/3);
  // bf16 holds these exactly; their sum 257.5 it would not (8 bits of mantissa).
  sums.add(1, 2, values(DType::BF16, {256, -1.5f}), /*k=*/0, /*keep_dtype=*/false);
  EXPECT_EQ(sums.at(1, 2).dtype(), DType::F32) << "the first micro-batch's becomes the f32 sum";
  sums.add(1, 2, values(DType::BF16, {1.5f, 0.25f}), 1, false);
  EXPECT_TRUE(sums.at(1, 2) == values(DType::F32, {257.5f, -1.25f}));
  sums.add(1, 2, values(DType::F32, {7, 7}), 0, false);
  EXPECT_TRUE(sums.at(1, 2) == values(DType::F32, {7, 7})) << "k = 0 starts a new sum";
  sums.add(0, 0, values(DType::BF16, {3}), 0, /*keep_dtype=*/true);
  EXPECT_EQ(sums.at(0, 0).dtype(), DType::BF16) << "kept in its dtype until the reduction";
}

TEST(GradientSums, TheSumOverReplicasLeavesEachTheTotalInF32) {
  GradientSums sums;
  sums.reset(/*devices=*/4, /*params=*/1);
  // Two replicas of two tensor-parallel ranks: rank 0's pieces on devices 0 and 2.
  sums.add(0, 0, values(DType::F32, {1, 2, 3}), 0, false);
  sums.add(2, 0, values(DType::BF16, {10, 20, 30}), 0, /*keep_dtype=*/true);
  sums.add(1, 0, values(DType::F32, {100, 100, 100}), 0, false);
  auto comm = makeInProcessCommunicator(2);
  ASSERT_TRUE(sums.sumOverReplicas(*comm, {0, 2}, 0).isOk());
  for (int d : {0, 2}) {
    EXPECT_EQ(sums.at(d, 0).dtype(), DType::F32) << "npu:" << d;
    EXPECT_TRUE(sums.at(d, 0) == values(DType::F32, {11, 22, 33})) << "npu:" << d;
  }
  EXPECT_TRUE(sums.at(1, 0) == values(DType::F32, {100, 100, 100})) << "another rank's";
}

} // namespace
} // namespace kiln::runtime
