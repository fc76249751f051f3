// A training job compiled ahead of time for N devices: the step every
// data-parallel replica runs on its share of the batch (forward and backward,
// the loss scaled; with tensor parallelism one rank's shard of it, which
// every rank of the group runs), the AdamW update each replica runs (all parameters, or
// with ZeRO-1 only those it owns), and what one device needs in memory. The
// runtime (runtime/trainer.h) runs it; nothing in it is compiled again.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "compiler/parallel/parallel_config.h"
#include "compiler/parallel/pipeline_partition.h"
#include "executable/executable.h"
#include "ir/graph.h"
#include "ir/tensor_split.h"

namespace kiln::parallel {

// A graph and its kernels as the runtime runs them (the compile's own record,
// its keys and fallbacks, stays with the compiler).
struct CompiledGraph {
  Graph graph;
  executable::Executable kernels;
};

// Where a device's bytes are at its peak. In the step: the bytes live at its
// busiest kernel by kind, and the arena's packing and alignment on top
// (`workspace`); in the update: what the device holds plus the largest
// bucket's new weights and moments (`workspace`).
struct MemoryBreakdown {
  bool update = false; // the peak is the update's, not the step's
  // Trained weights in the model's dtype, and their compute copies where the
  // step reads those (weight_copies.h).
  int64_t weights = 0;
  int64_t frozen_weights = 0;
  int64_t gradients =
      0; // the step's gradient outputs; in the update their f32 sums (ZeRO-2: owned)
  int64_t optimizer_state = 0; // AdamW moments, f32
  int64_t accumulated_gradients = 0;
  int64_t activations = 0; // everything else live: what the backward reads, temporaries, data
  int64_t workspace = 0;
  int64_t total() const;
  // The parts that are not zero, by name ("gradients (f32)"), in this order.
  std::vector<std::pair<std::string, int64_t>> parts() const;
  // "weights 1.0 GiB, gradients 2.0 GiB, ..."
  std::string toText() const;
};

// What one device holds at its peak, from the compile-time memory plans.
struct DeviceMemoryEstimate {
  int rank = 0;          // a device with the highest peak (with pipeline stages, its stage's first)
  int64_t step_peak = 0; // the forward+backward arena: weights, activations, gradients
  int64_t frozen_weights = 0;    // of step_peak: the frozen base weights (LoRA)
  int64_t trainable_weights = 0; // of step_peak: the weights the update trains, and their copies
  int64_t optimizer_state = 0;   // AdamW moments the device keeps between steps
  int64_t accumulated_gradients = 0; // f32 sums held over the micro-batches (grad_accum > 1)
  int in_flight = 0; // pipeline: the micro-batches whose activations the stage holds at its peak
  int64_t update_peak = 0;        // during its update, with the weights and gradients it holds
  int64_t peak = 0;               // the larger of step_peak + optimizer_state and update_peak
  MemoryBreakdown breakdown;      // of `peak`
  MemoryBreakdown step_breakdown; // of the step's own peak, whichever phase sets `peak`
  std::vector<std::pair<std::string, int64_t>> largest; // the step's largest buffers
  // "per device: peak 1.20 GiB (step 0.90 GiB + optimizer state 0.30 GiB; update 0.70 GiB)",
  // with LoRA also what of the step is frozen base and trainable weights.
  std::string toText() const;
};

// The names the compiled step and update take and give their tensors by:
// the runtime drives the graphs through these, knowing nothing of how the
// compiler named them.
struct TrainingSignature {
  std::string loss_scale;   // step input
  std::string dropout_seed; // step input (i64), new every step; empty without dropout
  // Step input (i64): the device's rank in its tensor-parallel group; empty
  // when the step does not read it.
  std::string tensor_parallel_rank;
  std::string learning_rate, grad_scale, adam_step; // update inputs (adam_step also an output)
  // Per parameter, in TrainingProgram::params order: its gradient (a step
  // output, an update input) and its AdamW moments (update inputs and outputs).
  std::vector<std::string> gradient, moment, velocity;
  // Per parameter: its compute copy (weight_copies.h; a step input, an update
  // input and output), or empty where the step reads the weight itself.
  std::vector<std::string> weight_copy;
};

// One weight of the program: the one table of what the compiler, the
// memory estimate and the trainer know of it.
struct Parameter {
  std::string name; // the Hugging Face name
  TensorType type;  // on one device: a tensor-parallel rank's piece
  TensorSplit split;
  int stage = 0;       // the pipeline rank whose devices hold it (its model stage's)
  int model_stage = 0; // the model stage whose programs read it (several per rank when interleaved)
  // ZeRO: the elements of the flat slice of `type` each data-parallel
  // replica updates and keeps the moments of (ir/tensor_split.h
  // takeFlatSlice); 0: every replica the whole piece.
  int64_t slice = 0;
  bool weight_sliced = false; // ZeRO-3: the device keeps only its slice of the weight too
  // The dtype of the compute copy the device keeps beside the weight
  // (weight_copies.h), or none.
  std::optional<DType> copy_dtype;
  // The copy's bytes (0 without one).
  int64_t copyBytes() const;
  // What a device keeps of it between steps: the held weight and its copy.
  int64_t keptBytes() const;
  // What the update reads and the moments' shape: the slice, or the piece.
  TensorType sliceType() const { return slice > 0 ? TensorType{type.dtype, {slice}} : type; }
  // The weight a device keeps between steps.
  TensorType heldType() const { return weight_sliced ? sliceType() : type; }
};

// One pipeline stage of the step (pipeline_partition.h): its forward and
// its backward, each run once per micro-batch in the 1F1B order.
struct PipelineStage {
  CompiledGraph forward, backward;
  const CompiledGraph &program(bool forward_pass) const {
    return forward_pass ? forward : backward;
  }
};

// The step's forward alone, for evaluation (kiln eval, and validation while
// training): the loss of one micro-batch on the layout's devices, with no
// backward, no gradient and no loss scale. One program per pipeline stage
// (one in all without stages), each a tensor-parallel rank's shard as the
// step's, handing activations down the pipeline by name ("pp.<value>") as
// the step's stages do. LoRA dropout is off, as in PEFT's eval mode.
struct EvalProgram {
  std::vector<CompiledGraph> stages;
  std::vector<StageTransfer> transfers; // from a stage's forward to a later one's
  int64_t micro_batch = 1;              // sequences one run takes
  int64_t seq = 0;
  bool empty() const { return stages.empty(); }
};

struct TrainingProgram {
  ParallelConfig parallel;
  int64_t batch_per_replica = 1; // sequences a replica trains on per step
  int64_t micro_batch = 1;       // of them, what one run of the step takes (grad_accum runs)
  int64_t seq = 0;
  CompiledGraph step; // the whole step; empty with pipeline stages
  // With pipeline parallelism (parallel.pp > 1): the step cut into model
  // stages (pp x virtual_stages, in model order; model stage s runs on the
  // devices of pipeline rank parallel.pipelineRank(s)), and what their
  // programs hand each other by name.
  std::vector<PipelineStage> stages;
  std::vector<StageTransfer> transfers;
  // The trained parameters, in graph order.
  std::vector<Parameter> params;
  // Weights the step reads but nothing trains (the base model under LoRA):
  // each device holds its piece, in the model's dtype, and no gradient,
  // master copy or moments of it.
  std::vector<Parameter> frozen;
  TrainingSignature signature;
  // The AdamW update in buckets (parallel_config.h updateBuckets): graph b
  // updates the parameters bucket_params[b] (indices into params; with ZeRO
  // their slices). Every device runs its stage's buckets in order: with
  // ZeRO every replica updates its equal slice, so one set serves them all.
  std::vector<CompiledGraph> optimizers;
  std::vector<std::vector<size_t>> bucket_params;
  std::vector<int> bucket_stage; // the pipeline rank of bucket b's parameters
  DeviceMemoryEstimate memory;
  // The forward for validation on held-out data; empty unless asked for.
  EvalProgram eval;

  // The step's programs: the whole step, or every stage's forward and backward.
  std::vector<const CompiledGraph *> stepPrograms() const;
  // The names of what the trainer keeps on each device across runs
  // (weights and their compute copies, gradient sums, moments): read where
  // they are by every run;
  // the rest of a run's inputs it receives into its arena.
  std::set<std::string> heldBuffers() const;
};

// The estimate for `program` (its graphs compiled, memory not yet filled).
DeviceMemoryEstimate estimateDeviceMemory(const TrainingProgram &program);

} // namespace kiln::parallel
