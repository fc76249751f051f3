#include "runtime/step_schedule.h"

namespace kiln::runtime {

bool RunCadence::checkpointAfter(int64_t step) const {
  return checkpoints && (step == steps || (checkpoint_every > 0 && step % checkpoint_every == 0));
}

bool RunCadence::validateAfter(int64_t step) const {
  return validates && (step == steps || (eval_every > 0 && step % eval_every == 0));
}

StepSchedule::StepSchedule(const parallel::TrainingProgram &program, const DeviceLayout &layout,
                           RunCadence cadence)
    : program_(program), layout_(layout), cadence_(cadence) {
  if (pipelined())
    order_ = parallel::pipelineSchedule(layout.pp(), program.parallel.grad_accum,
                                        program.parallel.virtual_stages);
  for (size_t i = 0; i < program.transfers.size(); ++i) {
    transfer_of_[program.transfers[i].name] = i;
    for (const parallel::StageProgram &to : program.transfers[i].to)
      ++uses_[program.transfers[i].name][program.parallel.pipelineRank(to.stage)];
  }
}

std::optional<size_t> StepSchedule::transferIndex(const std::string &name) const {
  auto it = transfer_of_.find(name);
  if (it == transfer_of_.end())
    return std::nullopt;
  return it->second;
}

std::map<int, int> StepSchedule::localReaders(const std::string &name) const {
  std::map<int, int> local;
  for (const auto &[rank, uses] : uses_.at(name))
    if (layout_.holdsStage(rank))
      local[rank] = uses;
  return local;
}

std::vector<parallel::ActionTime> StepSchedule::placed(const std::vector<double> &seconds) const {
  return parallel::simulatePipeline(order_, seconds, layout_.pp());
}

} // namespace kiln::runtime
