// `kiln train`: compile the training step for N devices ahead of time, then
// train on them: data, tensor and pipeline parallel, ZeRO-1 to -3, loss
// scaling, clipping, warmup and cosine decay, checkpoints and resume, a JSON
// log and a Chrome trace.
#include <iostream>

#include "compiler/driver/plan_report.h"
#include "compiler/driver/training.h"
#include "runtime/mpi_communicator.h"
#include "runtime/trainer.h"
#include "session/training_layout.h"
#include "session/training_session.h"
#include "support/byte_size.h"
#include "tools/kiln/cli_common.h"
#include "tools/kiln/job_flags.h"
#include "tools/kiln/lora_flags.h"

namespace kiln::cli {
namespace {

struct TrainOptions {
  driver::ModelRequest model;
  JobFlags job;
  driver::KernelSettings kernels;
  std::string data, data_dtype = "auto";
  std::string weights;
  session::LayoutFlags layout;
  int devices_per_process = 0; // under mpirun: the devices each process drives
  std::string device_memory;
  double lr = 3e-4, min_lr = -1;
  int64_t warmup = 0;
  std::string schedule = "cosine", loss_scale = "dynamic";
  std::string log_json;
  std::string eval_data; // --eval-data: held-out tokens to validate on
  bool compile_only = false;
  LoraFlags lora;
  runtime::TrainerOptions trainer;
};

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

// The trainer's options from the flags: device memory, loss scale, the
// learning-rate schedule, what resuming and keeping checkpoints need.
Status resolveTrainerOptions(TrainOptions &opts, const driver::ResolvedJob &job) {
  runtime::TrainerOptions &t = opts.trainer;
  if (!opts.device_memory.empty()) {
    KILN_ASSIGN_OR_RETURN(t.device_memory, parseSizeFlag("--device-memory", opts.device_memory));
  } else {
    t.device_memory = job.target.memory.hbm_bytes;
  }
  auto scale = runtime::parseLossScale(opts.loss_scale);
  if (!scale)
    return scale.error();
  t.loss_scale = *scale;
  auto schedule = runtime::parseSchedule(opts.schedule);
  if (!schedule)
    return schedule.error();
  if (opts.min_lr > opts.lr)
    return usageError("--min-lr " + number(opts.min_lr) + " is above --lr " + number(opts.lr) +
                      ": the floor of the schedule must not exceed its peak");
  t.schedule = {*schedule, opts.lr, opts.min_lr >= 0 ? opts.min_lr : opts.lr / 10, opts.warmup,
                t.steps};
  t.resume = t.resume || t.resume_if_exists;
  if (t.resume && t.checkpoint_dir.empty())
    return usageError(std::string(t.resume_if_exists ? "--resume-if-exists" : "--resume") +
                      " needs --checkpoint-dir (where to find the checkpoint)");
  if (t.keep_checkpoints > 0 && t.checkpoint_dir.empty())
    return usageError("--keep-checkpoints needs --checkpoint-dir");
  return Status::ok();
}

int runTrain(TrainOptions opts) {
  if (opts.layout.sequence_parallel)
    opts.job.settings.sequence_parallel = true;
  auto job = resolveJobFlags(opts.job, driver::kDefaultModelDType);
  if (!job)
    return fail(job.error());
  auto layout = session::resolveTrainingLayout(opts.layout, *job);
  if (!layout) // every check of the layout is on the flags alone
    return fail(usageError(layout.error()));
  const parallel::ParallelConfig *parallel = &layout->parallel;
  opts.model.batch = layout->batch;
  runtime::TrainerOptions &t = opts.trainer;
  if (Status resolved = resolveTrainerOptions(opts, *job); !resolved)
    return fail(resolved.error());
  auto config = decoderConfigOf(opts.model.model, "kiln train");
  if (!config)
    return fail(config.error());
  if (parallel->pp > 1) // the layers' split over the model stages
    if (auto split = parallel::layerStages(*parallel, config->num_hidden_layers); !split)
      return fail(usageError(split.error()));
  auto data_dtype = runtime::parseTokenDType(opts.data_dtype, config->vocab_size);
  if (!data_dtype)
    return fail(data_dtype.error());
  if (opts.model.seq == 0)
    opts.model.seq = config->seq_length;
  auto adapter = resolveLoraFlags(opts.lora, *config, t.seed, !opts.compile_only);
  if (!adapter)
    return fail(adapter.error());
  if (*adapter) {
    (*adapter)->config.base_model = opts.model.model;
    opts.model.lora = (*adapter)->config;
  }
  if (opts.compile_only) {
    auto program = driver::compileTrainingProgram(opts.model, *job, opts.kernels, *parallel);
    if (!program)
      return fail(program.error());
    std::cout << driver::planReport(opts.model, *job, opts.kernels, *parallel, *config, *program,
                                    t.device_memory);
    const parallel::DeviceMemoryEstimate &m = program->memory;
    if (m.peak <= t.device_memory)
      return kExitOk;
    note("the step needs " + formatBytes(m.peak) + " on npu:" + std::to_string(m.rank) +
         ", more than the device's " + formatBytes(t.device_memory));
    return kExitDoesNotFit;
  }
  if (opts.data.empty() || t.steps == 0)
    return usage(std::string(opts.data.empty() ? "--data" : "--steps") +
                 " is required to train (or --compile-only)");
  if (opts.eval_data.empty() && (t.eval_every > 0 || t.eval_tokens > 0))
    return usage(std::string(t.eval_every > 0 ? "--eval-every" : "--eval-tokens") +
                 " needs --eval-data (the held-out tokens to validate on)");
  if (t.eval_tokens > 0 && t.eval_tokens < opts.model.seq * opts.model.batch)
    return usage("--eval-tokens " + std::to_string(t.eval_tokens) +
                 " is less than one global batch of " + std::to_string(opts.model.batch) +
                 " windows of " + std::to_string(opts.model.seq) + " tokens (" +
                 std::to_string(opts.model.seq * opts.model.batch) + "), what validation reads");
  const int per_process =
      opts.devices_per_process > 0 ? opts.devices_per_process : opts.layout.devices;
  if (per_process > parallel::kMaxDevicesPerProcess)
    return usage("--devices " + std::to_string(per_process) + " in one process is too many: one " +
                 "process simulates at most " + std::to_string(parallel::kMaxDevicesPerProcess) +
                 " devices (spread more over processes with mpirun and --devices-per-process)");
  session::TrainingRun run;
  run.model = opts.model;
  run.kernels = opts.kernels;
  run.config = *config;
  run.adapter = std::move(*adapter);
  run.data = opts.data;
  run.data_dtype = *data_dtype;
  run.eval_data = opts.eval_data;
  run.weights = opts.weights;
  run.devices = opts.layout.devices;
  run.devices_per_process = opts.devices_per_process;
  run.log_json = opts.log_json;
  run.trainer = t;
  auto trained = session::train(std::move(run), *job, *parallel, std::cout);
  if (!trained) {
    // Under MPI every process waits for the others in each collective: an
    // error in one ends them all.
    const int code = fail(trained.error());
    runtime::abortMpiJob(code);
    return code;
  }
  return kExitOk;
}

// The devices and how the step is split over them.
void addLayoutFlags(CLI::App &cmd, TrainOptions &opts) {
  cmd.add_option("--devices", opts.layout.devices,
                 "simulated devices (default 8; at most 65536, 1024 in one process)")
      ->check(PositiveInteger); // the layout's check names the limit
  cmd.add_option("--dp", opts.layout.dp, "data-parallel replicas (default devices / (tp x pp))")
      ->check(PositiveInteger);
  cmd.add_option("--tp", opts.layout.tp, "tensor-parallel shards (default 1)")
      ->check(PositiveInteger);
  cmd.add_flag("--sequence-parallel", opts.layout.sequence_parallel,
               "with --tp: norms and residuals on each rank's slice of the sequence, the "
               "tensor-parallel all-reduces as all-gather and reduce-scatter (Megatron's "
               "sequence parallelism; job file: sequence_parallel)");
  cmd.add_option("--pp", opts.layout.pp,
                 "pipeline stages: the layers split into this many balanced stages run in a "
                 "1F1B schedule (default 1)")
      ->check(PositiveInteger);
  cmd.add_option("--virtual-stages", opts.layout.virtual_stages,
                 "with --pp: each device holds this many non-adjacent model stages, run in "
                 "Megatron's interleaved 1F1B schedule (a bubble V times smaller; the layers "
                 "must divide by pp x V and --micro-batches by pp; default 1)")
      ->check(PositiveInteger);
  cmd.add_option("--pp-layers", opts.layout.pp_layers,
                 "with --pp: each model stage's transformer layers in model order, e.g. "
                 "9,10,10,11 (pp x virtual-stages counts adding up to the model's layers; "
                 "default: balanced)")
      ->check(parsedBy(parallel::parseStageLayers, "COUNTS"));
  cmd.add_option("--micro-batches", opts.layout.micro_batches,
                 "micro-batches per step through the pipeline (the same count as --grad-accum)")
      ->check(PositiveInteger);
  cmd.add_flag("!--no-weight-copies", opts.layout.weight_copies,
               "under mixed precision, cast the weights in the step instead of keeping their "
               "compute copies, which the update writes (2 bytes a weight; docs/training.md)");
  cmd.add_option("--zero", opts.layout.zero,
                 "0; 1: shard the optimizer state over the replicas in equal slices; 2: and "
                 "the gradients; 3: and the weights, gathered before each use")
      ->check(IntegerIn(0, 3));
  cmd.add_option("--grad-accum", opts.layout.grad_accum,
                 "micro-batches per step: each replica's share of --batch runs in this many "
                 "pieces whose gradients are summed before the update (default 1)")
      ->check(PositiveInteger);
  cmd.add_option("--devices-per-process", opts.devices_per_process,
                 "under mpirun: the devices each process drives (processes x this = --devices)")
      ->check(PositiveInteger);
  cmd.add_option("--device-memory", opts.device_memory,
                 "memory of each device, e.g. 2GiB (default: the target's HBM)")
      ->check(ByteSize);
}

// Checkpoints, resuming, initial weights, logs, validation and profiles.
void addCheckpointAndEvalFlags(CLI::App &cmd, TrainOptions &opts) {
  cmd.add_option("--checkpoint-dir", opts.trainer.checkpoint_dir,
                 "write checkpoints here (step-N.safetensors); one run at a time per folder");
  cmd.add_option("--checkpoint-every", opts.trainer.checkpoint_every,
                 "steps between checkpoints (0: only the last)")
      ->check(NonNegativeInteger);
  cmd.add_option("--keep-checkpoints", opts.trainer.keep_checkpoints,
                 "keep only the N newest checkpoints in --checkpoint-dir (default: all)")
      ->check(PositiveInteger);
  cmd.add_flag("--resume", opts.trainer.resume,
               "continue from the latest checkpoint in --checkpoint-dir (an error when there "
               "is none)");
  cmd.add_flag("--resume-if-exists", opts.trainer.resume_if_exists,
               "continue from the latest checkpoint in --checkpoint-dir, or start afresh when "
               "there is none");
  cmd.add_flag("--resume-any-settings", opts.trainer.resume_any_settings,
               "resume even from a checkpoint of another model, layout, batch, dtype or data");
  cmd.add_option("--weights", opts.weights,
                 "initial weights by HF names: a safetensors file, a sharded checkpoint's index, "
                 "or the model folder; default: initialised from --seed");
  cmd.add_option("--seed", opts.trainer.seed, "initialisation and data seed (default 0)")
      ->check(NonNegativeInteger);
  cmd.add_option("--log-json", opts.log_json, "one JSON line per step");
  cmd.add_option("--eval-data", opts.eval_data,
                 "held-out tokens (a file as --data takes) to validate on: the loss and "
                 "perplexity of the model's forward over their consecutive windows, after every "
                 "--eval-every steps and after the last");
  cmd.add_option("--eval-every", opts.trainer.eval_every,
                 "steps between validations (needs --eval-data; default: after the last step "
                 "only)")
      ->check(PositiveInteger);
  cmd.add_option("--eval-tokens", opts.trainer.eval_tokens,
                 "validate on at most this many tokens from the start of --eval-data (default: "
                 "all of it, in whole global batches of windows)")
      ->check(PositiveInteger);
  cmd.add_option("--trace", opts.trainer.trace_path,
                 "write a Chrome/Perfetto trace, one track per device");
  cmd.add_option("--profile", opts.trainer.profile_dir,
                 "time every kernel of every step and device into DIR: op_summary.csv, "
                 "op_statistic.csv, fusion_op.csv, step_trace.csv, trace.json (as msprof "
                 "writes them)");
}

} // namespace

void registerTrainCommand(CLI::App &app, Action &action) {
  auto opts = std::make_shared<TrainOptions>();
  CLI::App *cmd = app.add_subcommand(
      "train", "Train a decoder (Qwen, Qwen2, Qwen3, Llama) on N simulated devices: the step "
               "compiled ahead of time, data, "
               "tensor and pipeline parallel (ZeRO-1 to -3 optional), loss scaling, clipping, "
               "checkpoints");
  addModelArgument(*cmd, opts->model.model, ModelArgument::Decoder);
  cmd->add_option("--data", opts->data,
                  "pre-tokenised data: a flat token file (nanoGPT's train.bin) or safetensors "
                  "with input_ids");
  cmd->add_flag("--compile-only", opts->compile_only,
                "compile the step and the updates and print the per-device memory plan; no "
                "training, no --data");
  addDataDTypeFlag(*cmd, opts->data_dtype);
  opts->trainer.steps = 0;
  cmd->add_option("--steps", opts->trainer.steps, "steps to train to (required to train)")
      ->check(PositiveInteger);
  cmd->add_option("--batch", opts->layout.batch,
                  "global batch, split over the replicas (default: one per replica)")
      ->check(PositiveInteger);
  cmd->add_option("--seq", opts->model.seq, "sequence length (default: the config's)")
      ->check(PositiveInteger);
  cmd->add_option("--lr", opts->lr, "peak learning rate (default 3e-4)")->check(FinitePositive);
  cmd->add_option("--min-lr", opts->min_lr, "cosine's floor (default lr / 10; at most --lr)")
      ->check(FiniteNonNegative);
  cmd->add_option("--warmup", opts->warmup, "linear warmup steps")->check(NonNegativeInteger);
  cmd->add_option("--schedule", opts->schedule, "cosine (default) or constant")
      ->check(parsedBy(runtime::parseSchedule, "SCHEDULE"));
  cmd->add_option("--loss-scale", opts->loss_scale,
                  "dynamic (MindSpore: 2^24, 2, 2000), dynamic:INIT,FACTOR,WINDOW, mindformers "
                  "(65536, 2, 1000), fixed:S or none")
      ->check(parsedBy(runtime::parseLossScale, "LOSS_SCALE"));
  cmd->add_option("--clip-grad-norm", opts->trainer.clip_grad_norm,
                  "clip the global gradient norm to this (0: off)")
      ->check(FiniteNonNegative);
  addLayoutFlags(*cmd, *opts);
  addCheckpointAndEvalFlags(*cmd, *opts);
  cmd->add_option("--inject-overflow-at", opts->trainer.inject_overflow_step,
                  "testing: make one replica's gradient inf at this 0-based step")
      ->group("");
  addLoraFlags(*cmd, opts->lora, /*new_adapters=*/true);
  addJobFlags(*cmd, opts->job);
  addKernelFlags(*cmd, opts->kernels);
  cmd->callback([opts, &action] { action = [opts] { return runTrain(*opts); }; });
  suggestOnUnknownArguments(*cmd);
}

} // namespace kiln::cli
