// The layout `kiln train` runs, from its flags and the job: the devices as
// dp x pp x tp (dp filled in when not given), ZeRO, the micro-batches
// (--micro-batches is --grad-accum's name for pipelines: one count, given
// once), the pipeline's model stages and their layers, sequence
// parallelism (the job's setting, which the flag turns on; it needs a
// tensor-parallel group), and the global batch when not given: one
// sequence per micro-batch of every replica. Every error is the command
// line's and names its flag.
#pragma once

#include <cstdint>
#include <string>

#include "compiler/driver/job.h"
#include "compiler/parallel/parallel_config.h"
#include "support/error.h"

namespace kiln::session {

struct LayoutFlags {
  int devices = 8, dp = 0, tp = 0, pp = 1, zero = 0;
  int grad_accum = 1;
  int micro_batches = 0; // 0: not given
  int virtual_stages = 1;
  std::string pp_layers;          // "9,10,10,11"; empty: balanced
  bool sequence_parallel = false; // the flag (the job may set it too)
  bool weight_copies = true;      // false: --no-weight-copies
  int64_t batch = 0;              // 0: not given
};

struct TrainingLayout {
  parallel::ParallelConfig parallel;
  int64_t batch = 0; // the global batch
};

// `job` was resolved with sequence parallelism on when the flag is.
Expected<TrainingLayout> resolveTrainingLayout(const LayoutFlags &flags,
                                               const driver::ResolvedJob &job);

} // namespace kiln::session
