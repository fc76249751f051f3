// The trainer's checkpoints: the run's counters and, through checkpoint_io.h,
// its trained tensors, written after the steps the schedule says; a
// resumed run continues from them bit for bit.
#include "runtime/trainer.h"

namespace kiln::runtime {

Status Trainer::resume(const std::string &path) {
  KILN_ASSIGN_OR_RETURN(
      TrainingState state,
      CheckpointIO::readForResume(path, options_.settings, options_.resume_any_settings));
  KILN_RETURN_IF_ERROR(checkpoints_.restore(state, path, weights_, moments_));
  step_ = state.step;
  updates_ = state.updates;
  feed_.reseed(state.seed); // the data continues as it began
  scaler_.restore(state.loss_scale, state.good_steps, state.overflows_in_a_row);
  resumed_from_ = path;
  return Status::ok();
}

Status Trainer::checkpoint() {
  // Every process takes part (ZeRO's moment slices come from every
  // replica, a pipeline's stages from their processes); the process holding
  // device 0 writes.
  TrainingState state;
  state.step = step_;
  state.updates = updates_;
  state.loss_scale = scaler_.scale();
  state.good_steps = scaler_.goodSteps();
  state.overflows_in_a_row = scaler_.overflowsInARow();
  state.seed = feed_.seed();
  state.settings = options_.settings;
  KILN_RETURN_IF_ERROR(checkpoints_.collect(weights_, moments_, state));
  if (!checkpoints_.writes())
    return Status::ok();
  return CheckpointIO::write(state, options_.checkpoint_dir, options_.keep_checkpoints,
                             options_.after_checkpoint);
}

} // namespace kiln::runtime
