// How a training job spreads over devices: N devices as D data-parallel
// replicas times P pipeline stages times T tensor-parallel shards
// (D x P x T = N; replica d's stage p's shards are devices
// (d*P + p)*T .. (d*P + p)*T + T-1), and whether the optimizer state is
// sharded across the replicas (ZeRO-1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/error.h"

namespace kiln::parallel {

// The most devices a job may name (dp x tp), and the most one process
// simulates (each holds its own copy of its weights, moments and buffers).
// Past them a layout is refused at once rather than planned or allocated.
inline constexpr int kMaxDevices = 65536;
inline constexpr int kMaxDevicesPerProcess = 1024;

struct ParallelConfig {
  int devices = 8;
  int dp = 8;
  int tp = 1;
  int pp = 1; // pipeline stages (pipeline_partition.h), run in a 1F1B schedule
  // Interleaved 1F1B (pipeline_schedule.h, Megatron's virtual pipeline
  // stages): the layers are cut into pp x virtual_stages model stages and
  // device r of a pipeline holds model stages r, r + pp, r + 2pp, ...
  int virtual_stages = 1;
  // The transformer layers of each model stage, in model order
  // (modelStages() counts); empty: Megatron's balanced split.
  std::vector<int> stage_layers;
  int modelStages() const { return pp * virtual_stages; }
  int pipelineRank(int model_stage) const { return model_stage % pp; }
  // 0: every replica holds the whole optimizer state; 1: each holds an
  // equal flat slice of it and updates that slice (ZeRO-1); 2: and keeps
  // only its slice of the summed gradients (ZeRO-2); 3: and of the weights,
  // each gathered whole just before its use (ZeRO-3, zero_shard.h).
  int zero = 0;
  // Micro-batches per step: each replica's share of the batch runs in this
  // many pieces whose gradients are summed before the update (with
  // pipeline stages, the micro-batches that flow through the pipeline).
  int grad_accum = 1;
  // Sequence parallelism (Korthikanti et al.) inside each tensor-parallel
  // group: the norms and residuals run on each rank's 1/tp of the sequence,
  // the group's collectives all-gather and reduce-scatter it. Only with tp > 1.
  bool sequence_parallel = false;
  bool sequenceParallel() const { return sequence_parallel && tp > 1; }
  // Under mixed precision the device keeps the weights the step casts in
  // their compute dtype too, written by the update (weight_copies.h): the
  // step reads them instead of casting. Only without ZeRO and in INFNAN
  // mode (the training driver says why); false: the step casts.
  bool weight_copies = true;
  int devicesPerReplica() const { return pp * tp; }
  // ZeRO-2 and -3: each gradient leaves the device as it is made (the
  // reduce-scatter overlaps the backward); a device keeps only its slice of
  // the f32 sum.
  bool gradientsLeaveWhenMade() const { return zero >= 2; }
  // "8 devices: dp 4 x tp 2, zero 1[, sequence parallel][, pp 2[, virtual stages 2][,
  // layers 1/2/1]][, grad-accum 4]"
  std::string toString() const;
};

inline constexpr int kMaxGradAccum = 65536;

// Fills what was left out (dp = devices / (tp x pp)) and checks the rest: D x P x T = N,
// a global batch that splits evenly over the replicas and their
// `grad_accum` micro-batches, ZeRO 0 to 3 (3 without pipeline stages; whether the model splits T
// ways is the model's to say), at most kMaxDevices devices. `dp` and `tp` of 0 mean "not given"; a
// global batch of 0 is not checked (one per micro-batch).
Expected<ParallelConfig> resolveParallelConfig(int devices, int dp, int tp, int zero,
                                               int64_t global_batch, int grad_accum = 1,
                                               int pp = 1);

// The pipeline's shape on top of a resolved `c`: `virtual_stages` model
// stages per device (2 or more needs --pp 2 or more and micro-batches a
// multiple of pp, as Megatron's interleaved schedule does) and, when given,
// each model stage's layer count (one positive count per model stage).
// Errors name the flags (--virtual-stages, --pp-layers).
Status setPipelineShape(ParallelConfig &c, int virtual_stages, std::vector<int> stage_layers);

// "9,10,10,11": --pp-layers' counts.
Expected<std::vector<int>> parseStageLayers(const std::string &text);

// The model stage of each of `layers` transformer layers: c.stage_layers
// when given (they must add up to `layers`), otherwise balanced
// (pipeline_partition.h balancedLayerStages); with virtual stages and no
// counts the layers must divide evenly over the model stages (Megatron's
// rule). Every model stage needs a layer.
Expected<std::vector<int>> layerStages(const ParallelConfig &c, int64_t layers);

// The update runs in buckets, one after another, each writing its new
// weights and moments while the others' stay as they are: the update's peak
// is the state plus one bucket, not twice the state. Splits the parameters
// `members` (indices into `param_bytes`) in order into buckets of at most
// max(largest member, total / kUpdateBuckets) bytes.
inline constexpr int kUpdateBuckets = 16;
std::vector<std::vector<size_t>> updateBuckets(const std::vector<int64_t> &param_bytes,
                                               const std::vector<size_t> &members);

} // namespace kiln::parallel
