#include "session/training_layout.h"

#include <utility>
#include <vector>

namespace kiln::session {

Expected<TrainingLayout> resolveTrainingLayout(const LayoutFlags &flags,
                                               const driver::ResolvedJob &job) {
  if (flags.micro_batches > 0 && flags.grad_accum > 1 && flags.micro_batches != flags.grad_accum)
    return Error("--micro-batches " + std::to_string(flags.micro_batches) + " and --grad-accum " +
                 std::to_string(flags.grad_accum) + " name the same count: give one");
  const int grad_accum = flags.micro_batches > 0 ? flags.micro_batches : flags.grad_accum;
  TrainingLayout layout;
  KILN_ASSIGN_OR_RETURN(layout.parallel, parallel::resolveParallelConfig(
                                             flags.devices, flags.dp, flags.tp, flags.zero,
                                             flags.batch, grad_accum, flags.pp));
  std::vector<int> stage_layers;
  if (!flags.pp_layers.empty()) {
    KILN_ASSIGN_OR_RETURN(stage_layers, parallel::parseStageLayers(flags.pp_layers));
  }
  KILN_RETURN_IF_ERROR(
      parallel::setPipelineShape(layout.parallel, flags.virtual_stages, std::move(stage_layers)));
  if (flags.sequence_parallel && layout.parallel.tp == 1)
    return Error("--sequence-parallel splits the sequence over a tensor-parallel group: it "
                 "needs --tp 2 or more");
  layout.parallel.sequence_parallel = job.effective.sequence_parallel.value_or(false);
  layout.parallel.weight_copies = flags.weight_copies;
  layout.batch =
      flags.batch > 0 ? flags.batch : int64_t{layout.parallel.dp} * layout.parallel.grad_accum;
  return layout;
}

} // namespace kiln::session
