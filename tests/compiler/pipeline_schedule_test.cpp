// The pipeline schedules: plain 1F1B's order and its bound on micro-batches
// in flight; the interleaved schedule's order as Megatron builds it, its
// dependencies kept in the one global order, its larger warm-up and its
// smaller bubble, (P - 1)/(V M) of the step; the checks of --virtual-stages
// and --pp-layers.
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "compiler/parallel/parallel_config.h"
#include "compiler/parallel/pipeline_schedule.h"

namespace kiln::parallel {
namespace {

double span(const std::vector<PipelineAction> &order, int ranks, int virtual_stages) {
  // Every model stage's forward 1 / V, backward 2 / V: a device's share of
  // one micro-batch is 3 whatever V is.
  std::vector<double> seconds;
  for (const PipelineAction &a : order)
    seconds.push_back((a.forward ? 1.0 : 2.0) / virtual_stages);
  double end = 0;
  for (const ActionTime &t : simulatePipeline(order, seconds, ranks))
    end = std::max(end, t.end);
  return end;
}

TEST(PipelineSchedule, OneForwardOneBackwardWithinItsBounds) {
  const int stages = 4, micro = 8;
  const std::vector<PipelineAction> order = pipelineSchedule(stages, micro);
  ASSERT_EQ(order.size(), size_t{2 * stages * micro});
  for (int s = 0; s < stages; ++s) {
    // Each stage's own order is 1F1B's, with at most P - s in flight.
    std::vector<PipelineAction> mine;
    for (const PipelineAction &a : order)
      if (a.stage == s)
        mine.push_back(a);
    EXPECT_EQ(mine, stageSchedule(s, stages, micro)) << s;
    int in_flight = 0, most = 0;
    for (const PipelineAction &a : mine) {
      in_flight += a.forward ? 1 : -1;
      most = std::max(most, in_flight);
    }
    EXPECT_EQ(most, stages - s) << s;
  }
  // On parallel devices of equal speed the step is (M + P - 1) forwards and
  // backwards: the bubble is P - 1 of them.
  EXPECT_DOUBLE_EQ(span(order, stages, 1), (micro + stages - 1) * 3.0);
}

// P = 2, V = 2, M = 4, device 0 (model stages 0 and 2): Megatron warms up
// with 2(P - 1) + (V - 1)P = 4 forwards, micro-batches in groups of P per
// model stage, the backwards taking the model stages in reverse.
TEST(PipelineSchedule, InterleavedOrderIsMegatrons) {
  auto F = [](int stage, int micro) { return PipelineAction{stage, micro, true}; };
  auto B = [](int stage, int micro) { return PipelineAction{stage, micro, false}; };
  EXPECT_EQ(stageSchedule(0, 2, 4, 2),
            (std::vector<PipelineAction>{F(0, 0), F(0, 1), F(2, 0), F(2, 1), F(0, 2), B(2, 0),
                                         F(0, 3), B(2, 1), F(2, 2), B(0, 0), F(2, 3), B(0, 1),
                                         B(2, 2), B(2, 3), B(0, 2), B(0, 3)}));
  // Device 1 (model stages 1 and 3) warms up with (V - 1)P = 2.
  EXPECT_EQ(stageSchedule(1, 2, 4, 2),
            (std::vector<PipelineAction>{F(1, 0), F(1, 1), F(3, 0), B(3, 0), F(3, 1), B(3, 1),
                                         F(1, 2), B(1, 0), F(1, 3), B(1, 1), F(3, 2), B(3, 2),
                                         F(3, 3), B(3, 3), B(1, 2), B(1, 3)}));
}

// Every size: the global order holds each action once, after what it waits
// for, each device in its own order; device 0 holds 2(P - 1) + (V - 1)P + 1
// model stages' micro-batches at once (PV when M = P: all warm-up); the
// step is M + (P - 1)/V micro-batches' work, a bubble of (P - 1)/(V M).
TEST(PipelineSchedule, InterleavedOrdersAreCompleteAndShrinkTheBubble) {
  for (int P : {2, 3, 4, 8})
    for (int V : {1, 2, 3, 4})
      for (int M : {P, 2 * P, 4 * P}) {
        const std::string what =
            "P " + std::to_string(P) + " V " + std::to_string(V) + " M " + std::to_string(M);
        const std::vector<PipelineAction> order = pipelineSchedule(P, M, V);
        ASSERT_EQ(order.size(), size_t(2) * P * V * M) << what;
        std::set<std::tuple<int, int, bool>> done;
        for (const PipelineAction &a : order) {
          EXPECT_TRUE(done.insert({a.stage, a.micro, a.forward}).second) << what;
          if (a.forward && a.stage > 0) {
            EXPECT_TRUE(done.count({a.stage - 1, a.micro, true})) << what;
          }
          if (!a.forward) {
            EXPECT_TRUE(done.count({a.stage, a.micro, true})) << what;
          }
          if (!a.forward && a.stage + 1 < P * V) {
            EXPECT_TRUE(done.count({a.stage + 1, a.micro, false})) << what;
          }
        }
        for (int r = 0; r < P; ++r) {
          std::vector<PipelineAction> mine;
          for (const PipelineAction &a : order)
            if (a.stage % P == r)
              mine.push_back(a);
          EXPECT_EQ(mine, stageSchedule(r, P, M, V)) << what << " device " << r;
        }
        int in_flight = 0, most = 0;
        for (const PipelineAction &a : stageSchedule(0, P, M, V)) {
          in_flight += a.forward ? 1 : -1;
          most = std::max(most, in_flight);
        }
        if (V == 1)
          EXPECT_EQ(most, P) << what;
        else if (M == P)
          EXPECT_EQ(most, P * V) << what;
        else
          EXPECT_EQ(most, 2 * (P - 1) + (V - 1) * P + 1) << what;
        const double bubble = span(order, P, V) / (3.0 * M) - 1;
        EXPECT_NEAR(bubble, (P - 1.0) / (V * M), 1e-12) << what;
      }
}

ParallelConfig pipeline(int pp, int micro_batches) {
  auto c = resolveParallelConfig(pp, 1, 1, 0, micro_batches, micro_batches, pp);
  EXPECT_TRUE(c) << c.message();
  return *c;
}

TEST(PipelineShape, VirtualStagesAndLayerCountsAreChecked) {
  ParallelConfig c = pipeline(2, 4);
  ASSERT_TRUE(setPipelineShape(c, 2, {}));
  EXPECT_EQ(c.modelStages(), 4);
  EXPECT_EQ(c.pipelineRank(3), 1);
  EXPECT_NE(c.toString().find("pp 2, virtual stages 2"), std::string::npos) << c.toString();
  auto split = layerStages(c, 8);
  ASSERT_TRUE(split) << split.message();
  EXPECT_EQ(*split, (std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3}));
  EXPECT_NE(layerStages(c, 6).message().find("do not split evenly over 4 model stages"),
            std::string::npos);

  ParallelConfig odd = pipeline(4, 6);
  EXPECT_NE(
      setPipelineShape(odd, 2, {}).message().find("--micro-batches 6 must be a multiple of 4"),
      std::string::npos);
  ParallelConfig alone = pipeline(1, 4);
  EXPECT_NE(setPipelineShape(alone, 2, {}).message().find("needs --pp 2 or more"),
            std::string::npos);

  ParallelConfig uneven = pipeline(4, 4);
  ASSERT_TRUE(setPipelineShape(uneven, 1, {1, 2, 2, 3}));
  auto layers = layerStages(uneven, 8);
  ASSERT_TRUE(layers) << layers.message();
  EXPECT_EQ(*layers, (std::vector<int>{0, 1, 1, 2, 2, 3, 3, 3}));
  EXPECT_NE(layerStages(uneven, 9).message().find("adds up to 8 layers; the model has 9"),
            std::string::npos);
  EXPECT_NE(uneven.toString().find("layers 1/2/2/3"), std::string::npos);
  ParallelConfig three = pipeline(4, 4);
  EXPECT_NE(setPipelineShape(three, 1, {2, 2, 4}).message().find("3 counts for 4 model stages"),
            std::string::npos);

  auto parsed = parseStageLayers("9,10,10,11");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(*parsed, (std::vector<int>{9, 10, 10, 11}));
  for (const char *bad : {"", "9,,10", "9,x", "0,4", "-1,5", "3,"})
    EXPECT_FALSE(parseStageLayers(bad)) << bad;
}

} // namespace
} // namespace kiln::parallel
