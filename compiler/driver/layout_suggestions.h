// When a training plan does not fit its devices: the switches that would
// make it smaller, each planned by the same compiler and memory planner as
// `kiln train --compile-only` (no formula), alone and all together.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/driver/training.h"

namespace kiln::driver {

struct LayoutSuggestion {
  std::string flags; // what to add to the command line: "--recompute full"
  int64_t peak = 0;  // the per-device peak it plans
  bool fits = false;
};

// Tries each switch on its own: --recompute selective and full (beyond the
// job's), --zero 2 (with replicas to shard over), --tp 2T (halving the
// replicas, when the model splits that way), micro-batches of one sequence
// (--grad-accum); then adds them one at a time, the one that lowers the
// peak most first, until the plan fits or nothing lowers it further. A
// variant the model or the batch cannot take, or that does not lower the
// peak, is left out. Each compile reuses the kernel cache.
std::vector<LayoutSuggestion> suggestLayouts(const ModelRequest &model, const ResolvedJob &job,
                                             const KernelSettings &settings,
                                             const parallel::ParallelConfig &layout, int64_t peak,
                                             int64_t capacity);

} // namespace kiln::driver
