// A training run as `kiln train` runs it, without the command line: the
// job's step compiled for its layout, the token data opened, the starting
// weights read or initialised, the processes of an MPI job connected, and
// the trainer run to the last step, printing one line per step and logging
// one JSON line per step.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>

#include "compiler/driver/compile.h"
#include "compiler/driver/job.h"
#include "compiler/driver/kernels.h"
#include "compiler/frontend/decoder_config.h"
#include "compiler/frontend/lora_adapter.h"
#include "compiler/parallel/parallel_config.h"
#include "ir/tensor.h"
#include "runtime/token_data.h"
#include "runtime/trainer.h"

namespace kiln::session {

// What a run trains and how, every setting resolved (the CLI checks the
// flags; this takes what they became).
struct TrainingRun {
  // The model at its global batch and sequence length; a LoRA run's
  // adapters' config in `model.lora`.
  driver::ModelRequest model;
  driver::KernelSettings kernels;
  frontend::DecoderConfig config; // the model's
  // A LoRA run's adapters (new, or read from a folder): trained, the base frozen.
  std::optional<frontend::LoraAdapter> adapter;
  std::string data; // the token file
  runtime::TokenDType data_dtype = runtime::TokenDType::U16;
  std::string eval_data; // held-out tokens; empty: no validation
  std::string weights;   // HF weights; empty: initialised from trainer.seed
  int devices = 8;
  int devices_per_process = 0; // 0: every device in this process (unless under mpirun)
  std::string log_json;        // one JSON line per step; empty: none
  // Device memory, loss scale, schedule, checkpoints, resume, seed, trace,
  // profile, validation cadence. train() fills in `settings`, `eval_data`,
  // `eval_path` and, for a LoRA run, `after_checkpoint`.
  runtime::TrainerOptions trainer;
};

// What a checkpoint of `run` records and a resumed run must share: the
// model, the layout, the batch, the dtype, the data and, for a LoRA run,
// the adapters and their base.
std::map<std::string, std::string> runSettings(const TrainingRun &run,
                                               const parallel::ParallelConfig &layout, DType dtype);

// The weights the run starts from (`run.weights`, or initialised from the
// seed) with the LoRA adapters; a LoRA run also writes a PEFT folder beside
// each checkpoint (set in `run.trainer.after_checkpoint`).
Expected<std::map<std::string, Tensor>> startingWeights(TrainingRun &run);

struct TrainingOutcome {
  int64_t steps_done = 0;
  bool already_done = false; // resumed at or past the last step: nothing trained
  // This process's devices' largest measured peak and the plan's (0 when
  // nothing trained).
  int64_t measured_peak = 0, planned_peak = 0;
};

// Trains `run` for `job` on `layout`. Process 0 of the job speaks for it:
// it prints the banner, each step's line and the measured peak to `out`,
// writes the log, the trace and the checkpoints (holding the checkpoint
// folder's lock throughout); the others profile into a folder each. A run
// resumed at or past its last step says so and trains nothing. An error
// after the processes are connected is the job's: the caller ends them all
// (runtime::abortMpiJob).
Expected<TrainingOutcome> train(TrainingRun run, const driver::ResolvedJob &job,
                                const parallel::ParallelConfig &layout, std::ostream &out);

} // namespace kiln::session
