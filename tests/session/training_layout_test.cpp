// The layout `kiln train` runs, without the CLI: dp filled in from the
// devices, one sequence per micro-batch of every replica when no batch is
// given, --micro-batches as --grad-accum's other name, the pipeline's
// stages and their layers, and sequence parallelism from the job; each
// conflict refused.
#include "session/training_layout.h"

#include <gtest/gtest.h>

#include "tests/support/tiny_qwen.h"

namespace kiln::session {
namespace {

driver::ResolvedJob job(bool sequence_parallel = false) {
  driver::JobSettings settings;
  if (sequence_parallel)
    settings.sequence_parallel = true;
  return testing::defaultJob(settings);
}

TEST(TrainingLayout, TheReplicasAndTheBatchFollowFromTheDevices) {
  LayoutFlags flags;
  flags.devices = 8;
  flags.tp = 2;
  auto layout = resolveTrainingLayout(flags, job());
  ASSERT_TRUE(layout.isOk()) << layout.message();
  EXPECT_EQ(layout->parallel.dp, 4);
  EXPECT_EQ(layout->batch, 4) << "one sequence per replica";
  flags.micro_batches = 3;
  layout = resolveTrainingLayout(flags, job());
  ASSERT_TRUE(layout.isOk()) << layout.message();
  EXPECT_EQ(layout->parallel.grad_accum, 3);
  EXPECT_EQ(layout->batch, 12) << "one sequence per micro-batch of every replica";
  flags.batch = 24;
  EXPECT_EQ(resolveTrainingLayout(flags, job())->batch, 24);
}

TEST(TrainingLayout, PipelineStagesTakeTheirLayersAndSequenceParallelismTheJobs) {
  LayoutFlags flags;
  flags.devices = 4;
  flags.pp = 2;
  flags.tp = 2;
  flags.micro_batches = 4;
  flags.virtual_stages = 2;
  flags.pp_layers = "1,2,2,1";
  auto layout = resolveTrainingLayout(flags, job(/*sequence_parallel=*/true));
  ASSERT_TRUE(layout.isOk()) << layout.message();
  EXPECT_EQ(layout->parallel.dp, 1);
  EXPECT_EQ(layout->parallel.virtual_stages, 2);
  EXPECT_EQ(layout->parallel.stage_layers, (std::vector<int>{1, 2, 2, 1}));
  EXPECT_TRUE(layout->parallel.sequence_parallel) << "the job's setting";
  EXPECT_FALSE(resolveTrainingLayout(flags, job())->parallel.sequence_parallel);
}

TEST(TrainingLayout, ConflictsAreRefused) {
  LayoutFlags both;
  both.devices = 2;
  both.micro_batches = 2;
  both.grad_accum = 4;
  EXPECT_FALSE(resolveTrainingLayout(both, job()).isOk()) << "one count named twice";
  LayoutFlags sp;
  sp.devices = 2;
  sp.sequence_parallel = true;
  EXPECT_FALSE(resolveTrainingLayout(sp, job(true)).isOk()) << "no tensor-parallel group";
  LayoutFlags uneven;
  uneven.devices = 6;
  uneven.tp = 4;
  EXPECT_FALSE(resolveTrainingLayout(uneven, job()).isOk());
  LayoutFlags layers;
  layers.devices = 2;
  layers.pp = 2;
  layers.pp_layers = "1,x";
  EXPECT_FALSE(resolveTrainingLayout(layers, job()).isOk());
}

} // namespace
} // namespace kiln::session
