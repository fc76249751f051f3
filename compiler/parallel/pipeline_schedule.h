// The 1F1B pipeline schedule (PipeDream-Flush, Megatron's non-interleaved
// schedule): stage s of P runs min(P - s - 1, M) forwards to fill the
// pipeline, then alternates one forward and one backward, then drains the
// backwards. A stage holds at most P - s micro-batches' activations at
// once, instead of GPipe's M.
//
// The host runs one device at a time, so the schedule is also one global
// order: rounds over the stages, each running its next action once what it
// waits for has run. The trainer runs that order and the memory plan walks
// it, so the bytes each device holds at every moment are the same in both.
#pragma once

#include <vector>

namespace kiln::parallel {

struct PipelineAction {
  int stage = 0;
  int micro = 0; // the micro-batch
  bool forward = true;
  bool operator==(const PipelineAction &) const = default;
};

// Stage `stage`'s actions in its own order.
std::vector<PipelineAction> stageSchedule(int stage, int stages, int micro_batches);

// Every stage's actions in the one global order described above.
std::vector<PipelineAction> pipelineSchedule(int stages, int micro_batches);

// When each action of `schedule` (pipelineSchedule's order; `seconds[i]`
// how long action i takes) starts and ends on devices that run in
// parallel: an action starts when its stage is free and what it waits for
// has ended (the same micro-batch's forward on the stage before, or its
// backward on the stage after). Times from 0.
struct ActionTime {
  double start = 0, end = 0;
};
std::vector<ActionTime> simulatePipeline(const std::vector<PipelineAction> &schedule,
                                         const std::vector<double> &seconds);

} // namespace kiln::parallel
