#include "session/training_session.h"

#include <filesystem>
#include <fstream>

#include "compiler/driver/finite_weights.h"
#include "compiler/driver/plan_report.h"
#include "compiler/driver/training.h"
#include "compiler/frontend/decoder_init.h"
#include "compiler/frontend/decoder_parameters.h"
#include "formats/hf_checkpoint.h"
#include "runtime/checkpoint.h"
#include "runtime/checkpoint_lock.h"
#include "runtime/evaluation.h"
#include "session/communicators.h"
#include "session/training_log.h"
#include "support/byte_size.h"

namespace kiln::session {

std::map<std::string, std::string>
runSettings(const TrainingRun &run, const parallel::ParallelConfig &layout, DType dtype) {
  const frontend::DecoderConfig &c = run.config;
  std::error_code ec;
  const std::filesystem::path data = std::filesystem::weakly_canonical(run.data, ec);
  std::map<std::string, std::string> settings = {
      {"model",
       std::string(c.family->name) + " hidden " + std::to_string(c.hidden_size) + ", " +
           std::to_string(c.num_hidden_layers) + " layers, " +
           std::to_string(c.num_attention_heads) + " heads of " + std::to_string(c.head_dim) +
           (c.groupSize() > 1 ? " sharing " + std::to_string(c.kvHeads()) + " key/value heads"
                              : "") +
           ", ffn " + std::to_string(c.intermediate_size) + ", vocab " +
           std::to_string(c.vocab_size) + ", seq " + std::to_string(run.model.seq)},
      {"layout", layout.toString()},
      {"batch", std::to_string(run.model.batch)},
      {"dtype", std::string(dtypeName(dtype))},
      {"data", (ec ? std::filesystem::path(run.data) : data).string() + " (" +
                   runtime::tokenDTypeName(run.data_dtype) + ")"}};
  // A LoRA run's checkpoints hold the adapters only: resuming needs the same
  // adapters on the same frozen base.
  if (run.model.lora.enabled()) {
    settings["lora"] = run.model.lora.toString();
    const std::filesystem::path base = std::filesystem::weakly_canonical(run.weights, ec);
    settings["base"] = run.weights.empty()
                           ? "initialised from seed " + std::to_string(run.trainer.seed)
                           : (ec ? run.weights : base.string());
  }
  return settings;
}

Expected<std::map<std::string, Tensor>> startingWeights(TrainingRun &run) {
  std::map<std::string, Tensor> weights;
  if (!run.weights.empty()) {
    KILN_ASSIGN_OR_RETURN(weights,
                          readHfWeights(run.weights, driver::finiteWeightsCheck(
                                                         driver::NonFiniteWeights::RefuseToTrain)));
    KILN_RETURN_IF_ERROR(frontend::checkWeightsFamily(run.config, weights, run.weights));
  } else {
    weights = frontend::initDecoderWeights(run.config, run.trainer.seed);
  }
  if (run.adapter) {
    // A LoRA run's checkpoints hold the adapters only; each is also written
    // as a PEFT adapter folder beside it.
    weights.insert(run.adapter->tensors.begin(), run.adapter->tensors.end());
    run.trainer.after_checkpoint = [config =
                                        run.adapter->config](const std::string &path,
                                                             const runtime::TrainingState &state) {
      return frontend::writeLoraAdapter(runtime::checkpointExportDir(path),
                                        frontend::LoraAdapter{config, state.weights});
    };
  }
  return weights;
}

namespace {

// Trains `program` on this process's devices once the processes are
// connected: `speaker` prints, logs and writes checkpoints.
Expected<TrainingOutcome> trainOn(TrainingRun &run, const parallel::ParallelConfig &layout,
                                  parallel::TrainingProgram program, Communicators comms,
                                  std::map<std::string, Tensor> weights,
                                  const runtime::TokenData &data, const std::string &numerics,
                                  std::ostream &out) {
  runtime::TrainerOptions &t = run.trainer;
  // One process speaks for the job and writes its files; every process
  // reads the checkpoint it resumes from.
  const int process = comms.process();
  const bool speaker = process == 0;
  if (!speaker) {
    t.trace_path.clear();
    run.log_json.clear();
    // Each process profiles its own devices.
    if (!t.profile_dir.empty())
      t.profile_dir += "/process-" + std::to_string(process);
  }
  // One writer per checkpoint folder, for the whole run: the process that
  // writes the checkpoints holds the folder's lock until it ends.
  std::optional<runtime::CheckpointDirLock> lock;
  if (speaker && !t.checkpoint_dir.empty()) {
    KILN_ASSIGN_OR_RETURN(runtime::CheckpointDirLock acquired,
                          runtime::CheckpointDirLock::acquire(t.checkpoint_dir));
    lock.emplace(std::move(acquired));
  }
  if (speaker)
    out << "kiln: " << layout.toString() << ", global batch " << run.model.batch << " "
        << driver::batchSplit(program) << ", seq " << program.seq << "; " << numerics << "; "
        << program.memory.toText() << " of " << formatBytes(t.device_memory) << "\n";
  KILN_ASSIGN_OR_RETURN(
      auto trainer, runtime::Trainer::create(std::move(program), t, std::move(comms.replicas),
                                             std::move(weights), data, std::move(comms.stages)));
  TrainingOutcome outcome;
  std::ofstream log;
  if (!run.log_json.empty()) {
    // A resumed run redoes the steps after its checkpoint: their old lines go.
    if (t.resume)
      KILN_RETURN_IF_ERROR(keepLogUpTo(run.log_json, trainer->stepsDone()));
    log.open(run.log_json, t.resume ? std::ios::app : std::ios::trunc);
    if (!log)
      return Error(run.log_json + ": cannot open the log for writing");
  }
  if (!trainer->resumedFrom().empty())
    out << "kiln: resumed from " << trainer->resumedFrom() << " at step " << trainer->stepsDone()
        << "\n";
  // A run resumed at or past its last step has nothing left: it says so and
  // ends as a finished run does, so that a script may re-run it.
  if (trainer->stepsDone() >= t.steps) {
    if (speaker)
      out << "kiln: already at step " << trainer->stepsDone() << " of " << t.steps
          << ", nothing to train (give a larger --steps to train on)\n";
    outcome.steps_done = trainer->stepsDone();
    outcome.already_done = true;
    return outcome;
  }
  KILN_RETURN_IF_ERROR(trainer->run([&](const runtime::StepRecord &r) -> Status {
    if (!speaker)
      return Status::ok();
    out << r.toText(t.steps) << std::endl;
    if (r.validation)
      out << r.validationText() << std::endl;
    if (log.is_open()) {
      log << r.toJson().dump() << "\n";
      log.flush();
    }
    return Status::ok();
  }));
  outcome.steps_done = trainer->stepsDone();
  for (int d = 0; d < trainer->localDevices(); ++d)
    outcome.measured_peak = std::max(outcome.measured_peak, trainer->memory(d).peak());
  outcome.planned_peak = trainer->plannedPeak();
  if (speaker)
    out << "kiln: measured device memory peak " << formatBytes(outcome.measured_peak)
        << " (planned " << formatBytes(outcome.planned_peak) << "): " << outcome.measured_peak
        << " bytes measured, " << outcome.planned_peak << " planned\n";
  return outcome;
}

} // namespace

Expected<TrainingOutcome> train(TrainingRun run, const driver::ResolvedJob &job,
                                const parallel::ParallelConfig &layout, std::ostream &out) {
  runtime::TrainerOptions &t = run.trainer;
  t.settings = runSettings(run, layout, job.dtype);
  KILN_ASSIGN_OR_RETURN(
      runtime::TokenData data,
      runtime::TokenData::open(run.data, run.data_dtype, run.config.vocab_size, run.model.seq));
  std::optional<runtime::TokenData> eval_data;
  if (!run.eval_data.empty()) {
    KILN_ASSIGN_OR_RETURN(runtime::TokenData held_out,
                          runtime::TokenData::open(run.eval_data, run.data_dtype,
                                                   run.config.vocab_size, run.model.seq));
    // Validation reads whole global batches of windows: at least one.
    KILN_RETURN_IF_ERROR(
        runtime::evalWindows(held_out, run.eval_data, run.model.batch, t.eval_tokens).status());
    eval_data = std::move(held_out);
    t.eval_data = &*eval_data;
    t.eval_path = run.eval_data;
  }
  KILN_ASSIGN_OR_RETURN(auto weights, startingWeights(run));
  KILN_ASSIGN_OR_RETURN(
      parallel::TrainingProgram program,
      driver::compileTrainingProgram(run.model, job, run.kernels, layout, eval_data.has_value()));
  const std::string numerics = job.target.name + ", " + driver::numericsSummary(job);
  KILN_ASSIGN_OR_RETURN(Communicators comms,
                        communicatorsFor(run.devices, run.devices_per_process, layout));
  return trainOn(run, layout, std::move(program), std::move(comms), std::move(weights), data,
                 numerics, out);
}

} // namespace kiln::session
