// The training loop over N simulated devices: D data-parallel replicas of P
// pipeline stages of T tensor-parallel ranks each. Every replica runs the
// compiled step on its share of the global batch (with stages, its
// micro-batches through them in the 1F1B order, trainer_pipeline.cpp), its
// T ranks in lockstep (executor.h runGroup); the gradients are summed
// across replicas (communicator.h), checked for overflow (every device's
// float status, and in INFNAN mode whether the gradients are finite),
// unscaled, clipped by their global norm and applied by the compiled AdamW
// update: by every replica, or with ZeRO each replica on its flat slice
// of every parameter, the slices all-gathered after (zero_sharder.h);
// with ZeRO-2 and -3 a device keeps only its slice of the summed gradients,
// which leave it as they are made, with ZeRO-3 only its slice of the weights. An overflow anywhere
// skips the update everywhere and lowers the loss scale (loss_scaler.h). Weights and checkpoints
// are whole Hugging Face tensors; each rank holds its piece.
//
// The Trainer composes its parts, each a class of its own: which devices
// the process drives (device_layout.h), the step's inputs (batch_feed.h),
// the order of the step's programs and when the run validates and writes
// checkpoints (step_schedule.h), the gradient sums (gradient_sums.h), ZeRO's
// slices (zero_sharder.h) and what a checkpoint holds (checkpoint_io.h).
//
// The devices of a process take turns on the host's cores: each kernel
// already runs on every core (executor.h), so running the replicas one
// after another keeps the machine exactly busy instead of oversubscribing
// it, and makes every sum come out in the same order every time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/parallel/training_program.h"
#include "runtime/batch_feed.h"
#include "runtime/checkpoint.h"
#include "runtime/checkpoint_io.h"
#include "runtime/communicator.h"
#include "runtime/device.h"
#include "runtime/device_layout.h"
#include "runtime/evaluation.h"
#include "runtime/executor.h"
#include "runtime/float_status.h"
#include "runtime/gradient_sums.h"
#include "runtime/loss_scaler.h"
#include "runtime/lr_schedule.h"
#include "runtime/profiler.h"
#include "runtime/step_schedule.h"
#include "runtime/token_data.h"
#include "runtime/trace.h"
#include "runtime/zero_sharder.h"

namespace kiln::runtime {

struct TrainerOptions {
  int64_t steps = 20;
  LrSchedule schedule;
  LossScaleSpec loss_scale;
  double clip_grad_norm = 0;    // 0: no clipping
  std::string checkpoint_dir;   // every process resumes from it; rank 0's writes it
  int64_t checkpoint_every = 0; // 0: only at the end (with a checkpoint_dir)
  bool resume = false;
  bool resume_if_exists = false;    // with resume: an empty folder starts afresh, not an error
  bool resume_any_settings = false; // resume from a checkpoint of other settings
  int64_t keep_checkpoints = 0;     // > 0: only the newest N step files stay
  // What the run exports beside each checkpoint (a LoRA run's PEFT adapter
  // folder), called with the checkpoint's path and state just before the
  // step file is published (checkpoint_io.h says why).
  CheckpointExport after_checkpoint;
  // What the run trains (model, layout, batch, dtype, data): written into
  // each checkpoint; a resumed run must have the same (checkpoint.h).
  std::map<std::string, std::string> settings;
  uint64_t seed = 0;
  int64_t device_memory = 0; // bytes per device
  std::string trace_path;
  std::string profile_dir; // per-kernel profile (profiler.h), written at the end
  // Validation (trainer_validation.cpp): after every `eval_every` steps
  // and after the last, the held-out windows of `eval_data` (named
  // `eval_path` in errors; null: no validation) run through program.eval,
  // at most `eval_tokens` tokens of them (0: all) in whole global batches.
  const TokenData *eval_data = nullptr;
  std::string eval_path;
  int64_t eval_every = 0; // 0: only after the last step
  int64_t eval_tokens = 0;
  // Testing the overflow path: at this step the first gradient element of
  // the last replica's first device overflows before the reduction (inf in
  // INFNAN mode; in saturation mode f16's largest finite value with that
  // device's float status set).
  int64_t inject_overflow_step = -1;
};

struct StepRecord {
  int64_t step = 0; // 1-based
  double loss = 0;
  double loss_scale = 0;
  double grad_norm = 0; // unscaled, before clipping; inf/nan on overflow
  double lr = 0;
  bool overflow = false;
  double seconds = 0;
  double tokens_per_s = 0;
  // The held-out loss after this step, when the run validated at it.
  std::optional<EvalRecord> validation;
  // With a validation also "eval_loss" and "eval_perplexity" (null when not
  // finite; what kiln report draws) and "validation", its whole record.
  nlohmann::json toJson() const;
  std::string toText(int64_t steps) const;
  // "validation at step 10: loss 5.1234  perplexity 168.0  (...)"; empty without one.
  std::string validationText() const;
};

class Trainer {
public:
  // `weights` are the initial weights by name (cast to each parameter's
  // dtype). `stages`: the processes this replica's pipeline is spread over
  // (null: every stage is in this process).
  static Expected<std::unique_ptr<Trainer>>
  create(parallel::TrainingProgram program, const TrainerOptions &options,
         std::unique_ptr<Communicator> communicator, std::map<std::string, Tensor> weights,
         const TokenData &data, std::unique_ptr<StageLink> stages = nullptr);

  // Trains to options.steps (from the checkpoint with resume), calling
  // `on_step` after every step.
  Status run(const std::function<Status(const StepRecord &)> &on_step);

  int64_t stepsDone() const { return step_; }
  std::string resumedFrom() const { return resumed_from_; }
  int localDevices() const { return static_cast<int>(memory_.size()); }
  const DeviceMemory &memory(int device) const { return memory_[device]; }
  int64_t plannedPeak() const { return program_.memory.peak; }

private:
  class PipelineRun; // trainer_pipeline.cpp
  Trainer(parallel::TrainingProgram program, const TrainerOptions &options,
          std::unique_ptr<Communicator> communicator, const TokenData &data,
          std::unique_ptr<StageLink> stages);
  Status start(std::map<std::string, Tensor> weights);
  Status createExecutors();
  Status startProfiler();
  Status placeWeights(const std::map<std::string, Tensor> &weights, bool fresh);
  Status resume(const std::string &path);
  void makeWeightCopies();
  Expected<StepRecord> step();
  // Validation (trainer_validation.cpp): the held-out loss, and one
  // micro-batch of it on local replica `r`: the windows from `first`
  // through its stages, its loss added to `loss`.
  Status createEvalExecutors(const ExecutorOptions &options);
  Expected<EvalRecord> validate();
  Status evalMicroBatch(int r, int64_t first, std::vector<FloatStatus> &status, float &loss);
  Status forwardBackward(int replica, double scale, float &loss);
  // With pipeline stages (trainer_pipeline.cpp): the replica's
  // micro-batches through its stages in the 1F1B order.
  Status pipelineForwardBackward(int replica, double scale, float &loss);
  // What every program of local replica `replica`'s micro-batch `k` reads
  // besides the weights (batch_feed.h).
  ops::TensorMap microBatchInputs(int replica, int k, double scale) const {
    return feed_.microBatch(step_, replicaOf(deviceOf(replica, layout_.firstStage(), 0)), k, scale);
  }
  // Adds micro-batch k's gradient `g` of parameter i into device d's f32 sum
  // (the first micro-batch's is the sum; `keep_dtype`: left in its dtype).
  Status accumulateGradient(int device, size_t i, Tensor g, int k, bool keep_dtype);
  void injectOverflow();
  Expected<bool> reduceAcrossReplicas(std::vector<float> &losses);
  Status reduceGradient(int tp_rank, size_t param);
  Expected<double> gradientSumOfSquares();
  Status updateDevices(double grad_scale, double lr);
  // Without ZeRO the replicas of this process update once: the first
  // replica's devices, whose results the others take (trainer.cpp).
  bool sharedUpdate() const { return zero_.stage() == 0 && comm_->localSize() > 1; }
  Status update(int device, double grad_scale, double lr);
  Status checkpoint();
  std::string deviceName(int device) const;
  int globalDevice(int device) const { return layout_.globalDevice(device); }
  // Host work of the step outside the compiled kernels, for the profiler.
  void profileHost(int device, const char *what, Profiler::Clock::time_point start);
  int tp() const { return program_.parallel.tp; }
  // The local devices in Megatron's order (device_layout.h).
  int deviceOf(int local_replica, int stage, int tp_rank) const {
    return layout_.deviceOf(local_replica, stage, tp_rank);
  }
  int tpRankOf(int device) const { return layout_.tpRankOf(device); }
  int stageOf(int device) const { return layout_.stageOf(device); }
  int replicaOf(int device) const { return layout_.replicaOf(device); }
  bool holdsStage(int stage) const { return layout_.holdsStage(stage); }
  bool holdsParam(size_t i) const { return holdsStage(program_.params[i].stage); }
  int processOfStage(int stage) const { return layout_.processOfStage(stage); } // in link_
  // The device of local replica r holding rank t's piece of parameter i.
  int deviceOfParam(int local_replica, size_t i, int tp_rank) const {
    return deviceOf(local_replica, program_.params[i].stage, tp_rank);
  }

  parallel::TrainingProgram program_;
  TrainerOptions options_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<StageLink> link_; // null: every stage is here
  DeviceLayout layout_;             // which of the job's devices this process drives
  BatchFeed feed_;
  StepSchedule schedule_;
  ZeroSharder zero_;
  CheckpointIO checkpoints_;
  LossScaler scaler_;
  std::unique_ptr<Executor> step_executor_;
  // With pipeline stages: model stage s's forward at 2s, its backward at 2s + 1.
  std::vector<std::unique_ptr<Executor>> stage_executors_;
  std::vector<int> stage_programs_;                         // in profiler_, likewise
  std::map<std::string, size_t> gradient_of_;               // a gradient's name -> its parameter
  std::vector<std::unique_ptr<Executor>> update_executors_; // per optimizer graph
  // Validation: per stage its forward's executor; the eval transfers by name.
  std::vector<std::unique_ptr<Executor>> eval_executors_;
  std::map<std::string, size_t> eval_transfer_of_;
  int64_t eval_windows_ = 0; // the held-out windows each validation reads
  // Per local device: replica r's tensor-parallel rank t is device r*T + t.
  std::vector<DeviceMemory> memory_;
  std::vector<FloatStatus> float_status_; // cleared before each step
  // Per device: its pieces (ZeRO-3: their slices), and their compute copies.
  std::vector<ops::TensorMap> weights_;
  std::vector<ops::TensorMap> moments_; // of its slices (ZeRO) or whole pieces
  GradientSums sums_;                   // per device and parameter, f32
  // A parameter's or its moments' name -> its index in program_.params.
  std::map<std::string, size_t> param_of_;
  int64_t step_ = 0;
  int64_t updates_ = 0;
  std::string resumed_from_;
  std::unique_ptr<Trace> trace_;
  std::unique_ptr<Profiler> profiler_;
  int step_program_ = -1;            // in profiler_
  std::vector<int> update_programs_; // in profiler_, per optimizer graph
};

} // namespace kiln::runtime
