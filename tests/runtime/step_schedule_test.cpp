// The step schedule on its own: without pipeline stages a replica runs the
// step once per micro-batch; with them the 1F1B order, of which a process
// runs its own pipeline ranks' actions, which of its ranks read what a
// program hands on, where the actions sit on devices running at once, and
// after which steps a run validates and writes checkpoints.
#include <gtest/gtest.h>

#include "runtime/step_schedule.h"

namespace kiln::runtime {
namespace {

// A step cut into `pp` x `virtual_stages` model stages of 4 micro-batches:
// stage 0 hands "pp.h" to stage 1's forward and stashes "pp.s0" for its
// own backward; stage 1's backward hands "pp.dh" back.
parallel::TrainingProgram pipelined(int pp, int virtual_stages = 1) {
  parallel::TrainingProgram p;
  p.parallel.pp = pp;
  p.parallel.virtual_stages = virtual_stages;
  p.parallel.grad_accum = 4;
  p.stages.resize(static_cast<size_t>(pp * virtual_stages));
  p.transfers = {{"pp.h", {0, true}, {{1, true}}},
                 {"pp.dh", {1, false}, {{0, false}}},
                 {"pp.s0", {0, true}, {{0, false}}}};
  return p;
}

TEST(StepSchedule, WithoutStagesAReplicaRunsTheStepOncePerMicroBatch) {
  parallel::TrainingProgram p;
  p.parallel.grad_accum = 3;
  const DeviceLayout layout(/*tp=*/2, /*pp=*/1, 0, /*local_replicas=*/2);
  const StepSchedule s(p, layout);
  EXPECT_FALSE(s.pipelined());
  EXPECT_EQ(s.microBatches(), 3);
  EXPECT_TRUE(s.order().empty());
}

TEST(StepSchedule, OneProcessRunsThe1F1BOrderWhole) {
  const parallel::TrainingProgram p = pipelined(2);
  const DeviceLayout layout(/*tp=*/1, /*pp=*/2, 0, 1);
  const StepSchedule s(p, layout);
  ASSERT_TRUE(s.pipelined());
  EXPECT_EQ(s.order(), parallel::pipelineSchedule(2, 4));
  EXPECT_EQ(s.order().size(), 2u * 2 * 4) << "a forward and a backward per stage and micro-batch";
  for (const parallel::PipelineAction &a : s.order()) {
    EXPECT_TRUE(s.runsHere(a));
    EXPECT_EQ(StepSchedule::programOf(a), 2u * a.stage + (a.forward ? 0 : 1));
  }
  EXPECT_EQ(s.readers("pp.h"), (std::map<int, int>{{1, 1}}));
  EXPECT_EQ(s.localReaders("pp.s0"), (std::map<int, int>{{0, 1}}));
  EXPECT_EQ(s.transferIndex("pp.dh"), std::optional<size_t>(1));
  EXPECT_EQ(s.transferIndex("input_ids"), std::nullopt) << "not a transfer";
}

TEST(StepSchedule, AProcessOfASpreadPipelineRunsItsOwnRanksActions) {
  const parallel::TrainingProgram p = pipelined(2);
  const DeviceLayout second(/*tp=*/1, /*pp=*/2, 0, 1, /*processes=*/2, /*index=*/1);
  const StepSchedule s(p, second);
  int here = 0;
  for (const parallel::PipelineAction &a : s.order()) {
    EXPECT_EQ(s.runsHere(a), a.stage == 1);
    here += s.runsHere(a) ? 1 : 0;
  }
  EXPECT_EQ(here, 2 * 4);
  EXPECT_EQ(s.localReaders("pp.h"), (std::map<int, int>{{1, 1}}));
  EXPECT_TRUE(s.localReaders("pp.dh").empty()) << "rank 0 reads it, in the other process";
}

TEST(StepSchedule, InterleavedModelStagesRunOnTheirPipelineRank) {
  const parallel::TrainingProgram p = pipelined(2, /*virtual_stages=*/2);
  const DeviceLayout layout(/*tp=*/1, /*pp=*/2, 0, 1);
  const StepSchedule s(p, layout);
  EXPECT_EQ(s.order(), parallel::pipelineSchedule(2, 4, 2));
  EXPECT_EQ(s.rankOf({2, 0, true}), 0);
  EXPECT_EQ(s.rankOf({3, 1, false}), 1);
}

TEST(StepSchedule, PlacedActionsOverlapAcrossRanksAndWaitForTheirInputs) {
  const parallel::TrainingProgram p = pipelined(2);
  const DeviceLayout layout(/*tp=*/1, /*pp=*/2, 0, 1);
  const StepSchedule s(p, layout);
  const std::vector<double> seconds(s.order().size(), 1.0);
  const std::vector<parallel::ActionTime> times = s.placed(seconds);
  ASSERT_EQ(times.size(), s.order().size());
  double span = 0;
  for (size_t i = 0; i < times.size(); ++i) {
    EXPECT_DOUBLE_EQ(times[i].end - times[i].start, 1.0);
    span = std::max(span, times[i].end);
    const parallel::PipelineAction &a = s.order()[i];
    if (!(a.stage == 1 && a.forward))
      continue;
    for (size_t j = 0; j < times.size(); ++j) // after stage 0's forward of the same micro-batch
      if (s.order()[j] == parallel::PipelineAction{0, a.micro, true}) {
        EXPECT_GE(times[i].start, times[j].end);
      }
  }
  EXPECT_LT(span, static_cast<double>(times.size())) << "the two ranks run at once";
}

TEST(RunCadence, CheckpointsAndValidationsFollowTheirIntervalsAndTheLastStep) {
  const RunCadence c{/*steps=*/10, /*checkpoints=*/true, /*checkpoint_every=*/4,
                     /*validates=*/true, /*eval_every=*/0};
  std::vector<int64_t> checkpoints, validations;
  for (int64_t step = 1; step <= 10; ++step) {
    if (c.checkpointAfter(step))
      checkpoints.push_back(step);
    if (c.validateAfter(step))
      validations.push_back(step);
  }
  EXPECT_EQ(checkpoints, (std::vector<int64_t>{4, 8, 10}));
  EXPECT_EQ(validations, (std::vector<int64_t>{10})) << "every 0: only after the last";
  parallel::TrainingProgram p;
  const DeviceLayout layout(1, 1, 0, 1);
  EXPECT_EQ(StepSchedule(p, layout, c).cadence().checkpoint_every, 4) << "the schedule's own";
  const RunCadence none{10, false, 4, false, 2};
  for (int64_t step = 1; step <= 10; ++step) {
    EXPECT_FALSE(none.checkpointAfter(step)) << "no checkpoint folder";
    EXPECT_FALSE(none.validateAfter(step)) << "no held-out data";
  }
}

} // namespace
} // namespace kiln::runtime
