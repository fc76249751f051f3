// When each piece of a training run happens, for one process: the
// programs one replica runs in a step (without pipeline stages the whole
// step once per micro-batch; with them every model stage's forward and
// backward in the 1F1B schedule's one global order,
// compiler/parallel/pipeline_schedule.h, of which the process runs those
// of its pipeline ranks), which of its ranks read what a program hands
// on, where the actions would sit on devices running at once, and after
// which steps the run validates and writes a checkpoint.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/parallel/pipeline_schedule.h"
#include "compiler/parallel/training_program.h"
#include "runtime/device_layout.h"

namespace kiln::runtime {

// After which steps (1-based) a run of `steps` steps validates and checkpoints.
struct RunCadence {
  int64_t steps = 0;
  bool checkpoints = false;     // a checkpoint folder was given
  int64_t checkpoint_every = 0; // 0: only after the last step
  bool validates = false;       // held-out data was given
  int64_t eval_every = 0;       // 0: only after the last step
  bool checkpointAfter(int64_t step) const;
  bool validateAfter(int64_t step) const;
};

class StepSchedule {
public:
  // `program` and `layout` must outlive the schedule.
  StepSchedule(const parallel::TrainingProgram &program, const DeviceLayout &layout,
               RunCadence cadence = {});

  // After which steps the run validates and writes checkpoints.
  const RunCadence &cadence() const { return cadence_; }

  bool pipelined() const { return !program_.stages.empty(); }
  int microBatches() const { return program_.parallel.grad_accum; }
  // With pipeline stages: one replica's actions in a step, in order.
  const std::vector<parallel::PipelineAction> &order() const { return order_; }
  // The pipeline rank whose devices run `a`, and whether this process holds it.
  int rankOf(const parallel::PipelineAction &a) const {
    return program_.parallel.pipelineRank(a.stage);
  }
  bool runsHere(const parallel::PipelineAction &a) const { return layout_.holdsStage(rankOf(a)); }
  // The index of `a`'s program among the stages' (forward 2s, backward 2s + 1).
  static size_t programOf(const parallel::PipelineAction &a) {
    return 2 * static_cast<size_t>(a.stage) + (a.forward ? 0 : 1);
  }

  // A transfer's index in program.transfers (its tag between processes);
  // nothing for a name that is not one.
  std::optional<size_t> transferIndex(const std::string &name) const;
  // Per pipeline rank, how many of its programs read transfer `name`.
  const std::map<int, int> &readers(const std::string &name) const { return uses_.at(name); }
  // The same, of the ranks this process holds.
  std::map<int, int> localReaders(const std::string &name) const;

  // Where each action of order() would start and end on devices running at
  // once, from the `seconds` each took here (0: another process's).
  std::vector<parallel::ActionTime> placed(const std::vector<double> &seconds) const;

private:
  const parallel::TrainingProgram &program_;
  const DeviceLayout &layout_;
  RunCadence cadence_;
  std::vector<parallel::PipelineAction> order_;
  std::map<std::string, size_t> transfer_of_;
  std::map<std::string, std::map<int, int>> uses_;
};

} // namespace kiln::runtime
