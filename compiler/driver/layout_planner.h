// `kiln plan`: which layout of a cluster trains a model, and how fast. Every
// layout (data x tensor x pipeline parallel, ZeRO stage, recomputation,
// micro-batch, sequence parallelism) is
// planned by the same compiler and memory planner as `kiln train
// --compile-only` (the kernels partitioned and checked, none compiled), and
// the ones that fit are ranked by the cost model's tokens/s per device
// (compiler/parallel/step_time.h). Layouts sharing a tensor-parallel size,
// pipeline stages, recomputation and micro-batch share one compiled step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/driver/training.h"
#include "compiler/parallel/step_time.h"

namespace kiln::driver {

struct PlanRequest {
  // model.batch: the global batch; model.seq: the sequence (given, not 0);
  // model.lora: a LoRA fine-tune.
  ModelRequest model;
  int devices = 8;
  int nodes = 0;             // 0: the devices over the target's devices_per_node, rounded up
  int64_t device_memory = 0; // 0: the target's HBM
  // --device-memory as the user wrote it ("600KiB"), for the kiln train
  // command the plan prints; empty: the bytes are written out.
  std::string device_memory_written;
  // Given: only this recomputation mode is planned (the job's --recompute).
  std::optional<passes::RecomputeMode> recompute;
};

struct LayoutCandidate {
  parallel::ParallelConfig layout; // dp, tp, pp (virtual stages, layer split), zero, grad_accum
  passes::RecomputeMode recompute = passes::RecomputeMode::None;
  int64_t micro_batch = 1; // sequences a replica runs at once
  int64_t peak = 0;        // the per-device peak kiln train --compile-only plans
  bool fits = false;
  parallel::MemoryBreakdown breakdown;
  std::optional<parallel::StepTime> time; // absent when the target lacks a figure
  // Why it does not fit: the peak against the device, the largest part of
  // it and the largest buffer. Empty when it fits.
  std::string reason;
  // "--tp 8 --zero 1 --recompute full --grad-accum 16": kiln train's flags
  // for this layout (with --devices and the model's own flags beside them).
  std::string trainFlags() const;
};

struct LayoutPlan {
  int nodes = 1;
  int64_t device_memory = 0;
  // The layouts that fit, fastest first (by peak when there are no times),
  // then those that do not, smallest peak first.
  std::vector<LayoutCandidate> candidates;
  std::string no_time;                        // why there are no step times, when there are none
  std::vector<std::string> would_fit;         // when nothing fits: what would
  double seconds = 0;                         // the search's own time
  const LayoutCandidate *recommended() const; // the first that fits, or null
};

// Every layout of `request` worth planning: tensor-parallel sizes dividing
// the devices (and the heads: the model says), 1, 2 or 4 pipeline stages
// (one sequence per micro-batch, at least as many micro-batches as
// stages; beside each plain pipeline that fits, the interleaved one with
// two model stages a device where the layers and micro-batches allow, and
// the split that evens out the parameters each stage holds, the embedding's
// and lm_head's included, where it is not the balanced one), replicas the global batch divides
// over, ZeRO 0 to 3 where there are replicas to shard over (3 without stages, one sequence per
// micro-batch), no/selective/full recomputation (or the request's mode),
// with sequence parallelism wherever tp > 1 divides the sequence (it never
// holds more than tensor parallelism without it, and moves the same bytes),
// with the job's passes (FlashAttentionFusionPass is on by default where the
// target has the fused op),
// micro-batches of 1, 2, 4, ... sequences. A larger micro-batch is planned
// only while the smaller one fits. When none fits,
// `would_fit` says what would, each planned the same way: more devices (how
// many), LoRA (Qwen's recipe, rank 64), or a shorter sequence.
Expected<LayoutPlan> planLayouts(const PlanRequest &request, const ResolvedJob &job,
                                 const KernelSettings &settings);

} // namespace kiln::driver
