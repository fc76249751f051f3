// The trainer's checkpoints: what a checkpoint holds of a run (the whole
// Hugging Face tensors joined from every rank's piece, ZeRO's moments from
// every replica's slice, the counters) and how a run resumes from one.
#include "runtime/trainer.h"

#include "support/file_io.h"
#include "runtime/checkpoint.h"

namespace kiln::runtime {

Status Trainer::resume(const std::string &path) {
  KILN_ASSIGN_OR_RETURN(TrainingState state, readCheckpoint(path));
  const std::string differ = settingsDiffer(state.settings, options_.settings);
  if (!differ.empty() && !options_.resume_any_settings)
    return Error(path + ": the checkpoint was written by a run with other settings: " + differ +
                 "; resume with its settings, give another --checkpoint-dir, or "
                 "--resume-any-settings to continue from it anyway");
  // Device `device`'s piece, of type `piece`, of the whole tensor `name` in `tensors`.
  auto restore = [&](const std::map<std::string, Tensor> &tensors, const std::string &name,
                     int device, const TensorType &piece) -> Expected<Tensor> {
    const TensorSplit &split = splitOf(name);
    auto it = tensors.find(name);
    if (it != tensors.end()) {
      const Expected<Shape> shape = splitShape(it->second.shape(), split, tp());
      if (shape && *shape == piece.shape && it->second.dtype() == piece.dtype)
        return takeShard(it->second, split, tpRankOf(device), tp());
    }
    const TensorType whole{piece.dtype, joinedShape(piece.shape, split, tp())};
    return Error(path + ": no " + typeToString(whole) + " tensor '" + name + "'" +
                 (it == tensors.end() ? "" : "; it holds " + typeToString(it->second.type())));
  };
  // ZeRO-3: the device's slice of its piece; the piece whole on the host.
  auto slice = [&](Tensor piece, int device) {
    return takeFlatSlice(piece, replicaOf(device), program_.parallel.dp);
  };
  for (int d = 0; d < static_cast<int>(weights_.size()); ++d) {
    for (const parallel::Parameter &p : program_.params) {
      if (p.stage != stageOf(d))
        continue;
      KILN_ASSIGN_OR_RETURN(Tensor piece, restore(state.weights, p.name, d, p.type));
      if (p.weight_sliced)
        whole_[tpRankOf(d)][p.name] = piece;
      weights_[d][p.name] = p.weight_sliced ? slice(std::move(piece), d) : std::move(piece);
    }
    for (auto &[name, t] : moments_[d]) {
      const parallel::Parameter &p = program_.params[param_of_.at(name)];
      KILN_ASSIGN_OR_RETURN(Tensor piece,
                            restore(state.moments, name, d, TensorType{DType::F32, p.type.shape}));
      t = p.slice > 0 ? slice(std::move(piece), d) : std::move(piece);
    }
  }
  step_ = state.step;
  updates_ = state.updates;
  options_.seed = state.seed; // the data continues as it began
  scaler_.restore(state.loss_scale, state.good_steps, state.overflows_in_a_row);
  resumed_from_ = path;
  return Status::ok();
}

Tensor Trainer::gather(const std::vector<ops::TensorMap> &per_device, int replica,
                       const std::string &name) const {
  std::vector<Tensor> pieces;
  for (int t = 0; t < tp(); ++t)
    pieces.push_back(per_device[deviceOfParam(replica, param_of_.at(name), t)].at(name));
  return joinShards(pieces, splitOf(name));
}

// Moment `name` of parameter i, whole: from every replica's slice (ZeRO),
// or from local replica 0's ranks.
Expected<Tensor> Trainer::wholeMoment(size_t i, const std::string &name) {
  const parallel::Parameter &p = program_.params[i];
  if (p.slice == 0)
    return gather(moments_, 0, name);
  std::vector<Tensor> pieces;
  for (int t = 0; t < tp(); ++t) {
    KILN_ASSIGN_OR_RETURN(Tensor piece, joinReplicaSlices(moments_, i, t, name, DType::F32));
    pieces.push_back(std::move(piece));
  }
  return joinShards(pieces, p.split);
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
  state.seed = options_.seed;
  state.settings = options_.settings;
  // A pipeline spread over processes: each tensor from the process holding
  // its stage, to every process of the replica.
  auto share = [&](size_t i, Tensor t, DType dtype) -> Expected<Tensor> {
    if (!link_)
      return t;
    const parallel::Parameter &p = program_.params[i];
    if (!holdsParam(i))
      t = Tensor(TensorType{dtype, joinedShape(p.type.shape, p.split, tp())});
    KILN_RETURN_IF_ERROR(link_->broadcast(t.data(), t.byteSize(), processOfStage(p.stage)));
    return t;
  };
  for (size_t i = 0; i < program_.params.size(); ++i) {
    const parallel::Parameter &p = program_.params[i];
    Tensor mine;
    if (holdsParam(i) && p.weight_sliced) { // ZeRO-3: the host's whole pieces
      std::vector<Tensor> pieces;
      for (int t = 0; t < tp(); ++t)
        pieces.push_back(whole_[t].at(p.name));
      mine = joinShards(pieces, p.split);
    } else if (holdsParam(i)) {
      mine = gather(weights_, 0, p.name);
    }
    KILN_ASSIGN_OR_RETURN(Tensor whole, share(i, std::move(mine), p.type.dtype));
    state.weights.emplace(p.name, std::move(whole));
  }
  for (size_t i = 0; i < program_.params.size(); ++i) {
    for (const std::string &name : {program_.signature.moment[i], program_.signature.velocity[i]}) {
      Tensor whole;
      if (holdsParam(i)) {
        KILN_ASSIGN_OR_RETURN(whole, wholeMoment(i, name));
      }
      KILN_ASSIGN_OR_RETURN(whole, share(i, std::move(whole), DType::F32));
      state.moments.emplace(name, std::move(whole));
    }
  }
  if (comm_->firstLocalRank() != 0 || (link_ && link_->index() != 0))
    return Status::ok();
  // The export first, the step file last: a run killed between leaves the
  // previous checkpoint as the latest, and the resumed run redoes this step
  // and its export; the other order left a checkpoint whose export was torn
  // (or missing) for good.
  if (options_.after_checkpoint) {
    const std::string path = checkpointPath(options_.checkpoint_dir, state.step);
    removeStaleTemporaries(checkpointExportDir(path), [](std::string_view) { return true; });
    KILN_RETURN_IF_ERROR(options_.after_checkpoint(path, state));
  }
  KILN_RETURN_IF_ERROR(writeCheckpoint(options_.checkpoint_dir, state).status());
  if (options_.keep_checkpoints > 0)
    KILN_RETURN_IF_ERROR(
        pruneCheckpoints(options_.checkpoint_dir, options_.keep_checkpoints).status());
  return Status::ok();
}

} // namespace kiln::runtime
