// What a training checkpoint holds of a run and how a run resumes from
// one. Writing: the whole Hugging Face tensors of the trained weights and
// their AdamW moments, joined from every tensor-parallel rank's piece (ZeRO's
// moments from every replica's slice, ZeRO-3's weights from the host's
// whole pieces) and, with a pipeline spread over processes, shared from the
// process holding each stage, so that the process holding device 0 writes
// them all; its export (a LoRA run's adapter) first, the step file last.
// Resuming: the newest checkpoint of the folder, its settings those of the
// run, each device's piece (and slice) of every tensor, checked against the
// program. The file format is checkpoint.h's.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "compiler/parallel/training_program.h"
#include "ops/interpreter.h"
#include "runtime/checkpoint.h"
#include "runtime/communicator.h"
#include "runtime/device_layout.h"
#include "runtime/zero_sharder.h"

namespace kiln::runtime {

// What a run writes beside a checkpoint, given its path and state.
using CheckpointExport = std::function<Status(const std::string &, const TrainingState &)>;

class CheckpointIO {
public:
  // Everything given must outlive it; `link` may be null (every stage here).
  CheckpointIO(const parallel::TrainingProgram &program, const DeviceLayout &layout,
               ZeroSharder &zero, Communicator &comm, StageLink *link);

  // The checkpoint a resumed run starts from: the newest in `dir`; empty
  // when there is none and `if_exists`, an error when there is none otherwise.
  static Expected<std::string> resumePoint(const std::string &dir, bool if_exists);
  // Checkpoint `path` read for a run of `settings`, which must be those it
  // was written with unless `any_settings`.
  static Expected<TrainingState> readForResume(const std::string &path,
                                               const std::map<std::string, std::string> &settings,
                                               bool any_settings);

  // Each local device's piece of `state`'s trained weights into `weights`
  // and of its moments into those `moments` names (per local device; with
  // ZeRO their slices, ZeRO-3's whole pieces into the sharder). `path`
  // names the checkpoint in errors.
  Status restore(const TrainingState &state, const std::string &path,
                 std::vector<ops::TensorMap> &weights, std::vector<ops::TensorMap> &moments) const;

  // `state`'s weights and moments, whole, from every local device's pieces
  // in `weights` and `moments`. Every process of the job takes part.
  Status collect(const std::vector<ops::TensorMap> &weights,
                 const std::vector<ops::TensorMap> &moments, TrainingState &state);

  // Whether this process writes the job's checkpoints (it holds device 0).
  bool writes() const;
  // Publishes `state` into `dir`: `exporter`'s folder (when given) first,
  // the step file last, then only the `keep` newest steps (0: all).
  static Status write(const TrainingState &state, const std::string &dir, int64_t keep,
                      const CheckpointExport &exporter);

private:
  const TensorSplit &splitOf(const std::string &name) const {
    return program_.params[param_of_.at(name)].split;
  }
  int deviceOfParam(int local_replica, size_t i, int t) const {
    return layout_.deviceOf(local_replica, program_.params[i].stage, t);
  }
  bool holdsParam(size_t i) const { return layout_.holdsStage(program_.params[i].stage); }
  // The whole tensor `name` from local replica `replica`'s pieces.
  Tensor gather(const std::vector<ops::TensorMap> &per_device, int replica,
                const std::string &name) const;
  Expected<Tensor> wholeMoment(const std::vector<ops::TensorMap> &moments, size_t i,
                               const std::string &name);
  // Parameter `i`'s whole tensor `t` (of `dtype`) from the process holding
  // its stage, on every process of the replica.
  Expected<Tensor> share(size_t i, Tensor t, DType dtype);

  const parallel::TrainingProgram &program_;
  const DeviceLayout &layout_;
  ZeroSharder &zero_;
  Communicator &comm_;
  StageLink *link_;
  std::map<std::string, size_t> param_of_; // a parameter's or its moments' name -> its index
};

} // namespace kiln::runtime
