// The trainer's device layout on its own: a process's local devices in
// Megatron's order, which replica, pipeline rank and tensor-parallel rank
// each is, and the job's numbering of them, whole or with a replica's
// pipeline spread over processes.
#include <set>

#include <gtest/gtest.h>

#include "runtime/device_layout.h"

namespace kiln::runtime {
namespace {

TEST(DeviceLayout, LocalDevicesRunTensorRanksThenStagesThenReplicas) {
  const DeviceLayout l(/*tp=*/2, /*pp=*/3, /*first_replica=*/0, /*local_replicas=*/2);
  ASSERT_EQ(l.devices(), 12);
  int device = 0;
  for (int r = 0; r < 2; ++r)
    for (int s = 0; s < 3; ++s)
      for (int t = 0; t < 2; ++t, ++device) {
        EXPECT_EQ(l.deviceOf(r, s, t), device);
        EXPECT_EQ(l.replicaOf(device), r);
        EXPECT_EQ(l.stageOf(device), s);
        EXPECT_EQ(l.tpRankOf(device), t);
        EXPECT_EQ(l.globalDevice(device), device) << "one process: the job's own numbering";
      }
  for (int s = 0; s < 3; ++s) {
    EXPECT_TRUE(l.holdsStage(s));
    EXPECT_EQ(l.processOfStage(s), 0);
  }
  EXPECT_FALSE(l.holdsStage(3));
}

TEST(DeviceLayout, AReplicaOnAnMpiProcessIsNumberedFromItsFirstRank) {
  // The third process of a job of one replica per process: replica 2.
  const DeviceLayout l(/*tp=*/4, /*pp=*/1, /*first_replica=*/2, /*local_replicas=*/1);
  ASSERT_EQ(l.devices(), 4);
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(l.replicaOf(t), 2);
    EXPECT_EQ(l.globalDevice(t), 8 + t);
  }
}

TEST(DeviceLayout, APipelineSpreadOverProcessesCoversTheJobOnce) {
  // dp 2, pp 4, tp 2: each replica's four stages over two processes of two
  // stages each, four processes in all; every device of the job once.
  std::set<int> seen;
  for (int replica = 0; replica < 2; ++replica)
    for (int index = 0; index < 2; ++index) {
      const DeviceLayout l(2, 4, replica, 1, /*processes=*/2, index);
      ASSERT_EQ(l.devices(), 4);
      EXPECT_EQ(l.firstStage(), 2 * index);
      EXPECT_EQ(l.localStages(), 2);
      for (int s = 0; s < 4; ++s) {
        EXPECT_EQ(l.holdsStage(s), s / 2 == index) << "stage " << s;
        EXPECT_EQ(l.processOfStage(s), s / 2);
      }
      for (int d = 0; d < l.devices(); ++d) {
        EXPECT_TRUE(l.holdsStage(l.stageOf(d)));
        EXPECT_EQ(l.deviceOf(0, l.stageOf(d), l.tpRankOf(d)), d);
        EXPECT_TRUE(seen.insert(l.globalDevice(d)).second) << "npu:" << l.globalDevice(d);
      }
    }
  EXPECT_EQ(seen.size(), 16u);
  EXPECT_EQ(*seen.rbegin(), 15);
}

} // namespace
} // namespace kiln::runtime
