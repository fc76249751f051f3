// The 1F1B pipeline schedules. Plain 1F1B (PipeDream-Flush, Megatron's
// non-interleaved schedule): stage s of P runs min(P - s - 1, M) forwards to
// fill the pipeline, then alternates one forward and one backward, then
// drains the backwards. A stage holds at most P - s micro-batches'
// activations at once, instead of GPipe's M.
//
// Interleaved 1F1B (Megatron's virtual pipeline stages, Narayanan et al.
// 2021): the layers are cut into P x V model stages and device r holds the
// V non-adjacent ones r, r + P, r + 2P, ... Its M x V actions of each kind
// go in groups of P micro-batches per model stage: virtual micro-batch k is
// micro-batch (k / PV) P + k % P of its model stage (k % PV) / P (the
// backwards take the model stages in reverse). Device r warms up with
// 2(P - r - 1) + (V - 1) P forwards (all of them when that reaches M x V),
// then alternates, then drains. M must be a multiple of P. The bubble shrinks
// from (P - 1)/M of the step to (P - 1)/(V M); device 0 holds
// (1 + (P - 1)/(P V)) times the activations of plain 1F1B's first stage.
//
// The host runs one device at a time, so the schedule is also one global
// order: rounds over the devices, each running its next action once what it
// waits for has run. The trainer runs that order and the memory plan walks
// it, so the bytes each device holds at every moment are the same in both.
#pragma once

#include <vector>

namespace kiln::parallel {

struct PipelineAction {
  int stage = 0; // the model stage; its device is stage % P
  int micro = 0; // the micro-batch
  bool forward = true;
  bool operator==(const PipelineAction &) const = default;
};

// Device `rank`'s actions in its own order, of P = `ranks` devices each
// holding `virtual_stages` model stages (1: plain 1F1B).
std::vector<PipelineAction> stageSchedule(int rank, int ranks, int micro_batches,
                                          int virtual_stages = 1);

// Every device's actions in the one global order described above.
std::vector<PipelineAction> pipelineSchedule(int ranks, int micro_batches, int virtual_stages = 1);

// When each action of `schedule` (pipelineSchedule's order; `seconds[i]`
// how long action i takes) starts and ends on devices that run in
// parallel: an action starts when its device (model stage % `ranks`; 0:
// one model stage per device) is free and what it waits for has ended (the
// same micro-batch's forward on the model stage before, or its backward on
// the one after). Times from 0.
struct ActionTime {
  double start = 0, end = 0;
};
std::vector<ActionTime> simulatePipeline(const std::vector<PipelineAction> &schedule,
                                         const std::vector<double> &seconds, int ranks = 0);

} // namespace kiln::parallel
