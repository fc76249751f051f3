// ZeRO's sharder on its own: a device's flat slice of a piece and the
// whole piece joined back from every replica's slice (the last padded),
// ZeRO-1's all-gather of the updated slices into every replica's weights,
// and ZeRO-3's into the host's whole pieces that the step's gathers read.
#include <gtest/gtest.h>

#include "ir/tensor_split.h"
#include "runtime/communicator.h"
#include "runtime/zero_sharder.h"

namespace kiln::runtime {
namespace {

// Two replicas of two tensor-parallel ranks in one process.
constexpr int kDp = 2, kTp = 2;

Tensor counting(int64_t n, float from) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = from + static_cast<float>(i);
  return Tensor::fromFloats(DType::F32, Shape({n}), v);
}

// "w": each rank's piece [2, 3] of a [4, 3] weight split on axis 0; "b":
// a replicated [5], whose slices of 3 leave the last one padded.
std::vector<parallel::Parameter> params(bool weight_sliced) {
  parallel::Parameter w{"w", TensorType{DType::F32, {2, 3}}, TensorSplit{0}};
  parallel::Parameter b{"b", TensorType{DType::F32, {5}}, TensorSplit{}};
  for (parallel::Parameter *p : {&w, &b}) {
    p->slice = flatSliceElements(numElements(p->type.shape), kDp);
    p->weight_sliced = weight_sliced;
  }
  return {w, b};
}

// Rank t's piece of parameter `name`, different per rank.
Tensor pieceOf(const parallel::Parameter &p, int t, float from) {
  return counting(numElements(p.type.shape), from + 100.0f * static_cast<float>(t))
      .reshaped(p.type.shape);
}

class ZeroSharderTest : public ::testing::Test {
protected:
  const DeviceLayout layout{kTp, /*pp=*/1, /*first_replica=*/0, /*local_replicas=*/kDp};
  std::unique_ptr<Communicator> comm = makeInProcessCommunicator(kDp);
};

TEST_F(ZeroSharderTest, EveryReplicasSliceJoinsBackIntoThePiece) {
  const std::vector<parallel::Parameter> ps = params(false);
  ZeroSharder zero(ps, kDp, /*zero=*/1, layout, *comm);
  std::vector<ops::TensorMap> per_device(layout.devices());
  for (size_t i = 0; i < ps.size(); ++i)
    for (int d = 0; d < layout.devices(); ++d)
      per_device[d][ps[i].name] = zero.sliceOf(pieceOf(ps[i], layout.tpRankOf(d), 1), d);
  EXPECT_EQ(per_device[0].at("b").shape(), Shape({3}));
  EXPECT_TRUE(per_device[2].at("b") == Tensor::fromFloats(DType::F32, Shape({3}), {4, 5, 0}))
      << "replica 1's slice of b, padded with a zero";
  for (size_t i = 0; i < ps.size(); ++i)
    for (int t = 0; t < kTp; ++t) {
      auto whole = zero.joinReplicaSlices(per_device, i, t, ps[i].name, DType::F32);
      ASSERT_TRUE(whole.isOk()) << whole.message();
      EXPECT_TRUE(*whole == pieceOf(ps[i], t, 1)) << ps[i].name << " rank " << t;
    }
}

TEST_F(ZeroSharderTest, TheUpdateReadsItsSliceOnlyOfASlicedParameter) {
  std::vector<parallel::Parameter> ps = params(false);
  ps[1].slice = 0; // every replica updates the whole of b
  ZeroSharder zero(ps, kDp, /*zero=*/1, layout, *comm);
  const Tensor w = pieceOf(ps[0], 0, 1), b = pieceOf(ps[1], 0, 1);
  const int replica1 = layout.deviceOf(1, 0, 0);
  EXPECT_TRUE(zero.updateInput(0, w, replica1) == takeFlatSlice(w, 1, kDp));
  EXPECT_TRUE(zero.updateInput(1, b, replica1) == b);
}

TEST_F(ZeroSharderTest, Zero1GathersTheNewSlicesIntoEveryReplicasWeight) {
  const std::vector<parallel::Parameter> ps = params(false);
  ZeroSharder zero(ps, kDp, /*zero=*/1, layout, *comm);
  std::vector<ops::TensorMap> weights(layout.devices());
  for (int d = 0; d < layout.devices(); ++d)
    for (const parallel::Parameter &p : ps) {
      weights[d][p.name] = pieceOf(p, layout.tpRankOf(d), 0); // before the update
      zero.keepUpdated(d, p.name, zero.sliceOf(pieceOf(p, layout.tpRankOf(d), 50), d));
    }
  ASSERT_TRUE(zero.allGather(weights).isOk());
  for (int d = 0; d < layout.devices(); ++d)
    for (const parallel::Parameter &p : ps)
      EXPECT_TRUE(weights[d].at(p.name) == pieceOf(p, layout.tpRankOf(d), 50))
          << p.name << " on npu:" << d;
}

TEST_F(ZeroSharderTest, Zero3GathersTheSlicesOntoTheHostForTheStepsGathers) {
  const std::vector<parallel::Parameter> ps = params(true);
  ZeroSharder zero(ps, kDp, /*zero=*/3, layout, *comm);
  ASSERT_TRUE(zero.weightsSliced());
  std::vector<ops::TensorMap> weights(layout.devices());
  for (int d = 0; d < layout.devices(); ++d)
    for (const parallel::Parameter &p : ps)
      weights[d][p.name] = zero.sliceOf(pieceOf(p, layout.tpRankOf(d), 7), d);
  const std::vector<ops::TensorMap> slices = weights;
  ASSERT_TRUE(zero.allGather(weights).isOk());
  for (int t = 0; t < kTp; ++t)
    for (const parallel::Parameter &p : ps) {
      auto gathered = zero.gatherWeight(p.name, t);
      ASSERT_TRUE(gathered.isOk()) << gathered.message();
      EXPECT_TRUE(*gathered == pieceOf(p, t, 7)) << p.name << " rank " << t;
    }
  for (int d = 0; d < layout.devices(); ++d)
    for (const parallel::Parameter &p : ps)
      EXPECT_TRUE(weights[d].at(p.name) == slices[d].at(p.name)) << "a device keeps its slice";
  EXPECT_FALSE(zero.gatherWeight("missing", 0).isOk());
}

} // namespace
} // namespace kiln::runtime
