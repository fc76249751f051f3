#include "runtime/checkpoint_io.h"

#include <utility>

#include "ir/tensor_split.h"
#include "support/file_io.h"

namespace kiln::runtime {

CheckpointIO::CheckpointIO(const parallel::TrainingProgram &program, const DeviceLayout &layout,
                           ZeroSharder &zero, Communicator &comm, StageLink *link)
    : program_(program), layout_(layout), zero_(zero), comm_(comm), link_(link) {
  for (size_t i = 0; i < program.params.size(); ++i)
    param_of_[program.params[i].name] = param_of_[program.signature.moment[i]] =
        param_of_[program.signature.velocity[i]] = i;
}

Expected<std::string> CheckpointIO::resumePoint(const std::string &dir, bool if_exists) {
  KILN_ASSIGN_OR_RETURN(auto latest, latestCheckpoint(dir));
  if (latest)
    return *latest;
  if (if_exists)
    return std::string();
  return Error("--resume: no checkpoint (step-N.safetensors) in '" + dir +
               "' to resume from; check the folder, drop --resume to start afresh, or use "
               "--resume-if-exists");
}

Expected<TrainingState>
CheckpointIO::readForResume(const std::string &path,
                            const std::map<std::string, std::string> &settings, bool any_settings) {
  KILN_ASSIGN_OR_RETURN(TrainingState state, readCheckpoint(path));
  const std::string differ = settingsDiffer(state.settings, settings);
  if (!differ.empty() && !any_settings)
    return Error(path + ": the checkpoint was written by a run with other settings: " + differ +
                 "; resume with its settings, give another --checkpoint-dir, or "
                 "--resume-any-settings to continue from it anyway");
  return state;
}

Status CheckpointIO::restore(const TrainingState &state, const std::string &path,
                             std::vector<ops::TensorMap> &weights,
                             std::vector<ops::TensorMap> &moments) const {
  const int tp = layout_.tp();
  // Device `device`'s piece, of type `piece`, of the whole tensor `name` in `tensors`.
  auto restore = [&](const std::map<std::string, Tensor> &tensors, const std::string &name,
                     int device, const TensorType &piece) -> Expected<Tensor> {
    const TensorSplit &split = splitOf(name);
    auto it = tensors.find(name);
    if (it != tensors.end()) {
      const Expected<Shape> shape = splitShape(it->second.shape(), split, tp);
      if (shape && *shape == piece.shape && it->second.dtype() == piece.dtype)
        return takeShard(it->second, split, layout_.tpRankOf(device), tp);
    }
    const TensorType whole{piece.dtype, joinedShape(piece.shape, split, tp)};
    return Error(path + ": no " + typeToString(whole) + " tensor '" + name + "'" +
                 (it == tensors.end() ? "" : "; it holds " + typeToString(it->second.type())));
  };
  for (int d = 0; d < static_cast<int>(weights.size()); ++d) {
    for (const parallel::Parameter &p : program_.params) {
      if (p.stage != layout_.stageOf(d))
        continue;
      KILN_ASSIGN_OR_RETURN(Tensor piece, restore(state.weights, p.name, d, p.type));
      if (p.weight_sliced)
        zero_.holdWhole(layout_.tpRankOf(d), p.name, piece);
      weights[d][p.name] = p.weight_sliced ? zero_.sliceOf(piece, d) : std::move(piece);
    }
    for (auto &[name, t] : moments[d]) {
      const parallel::Parameter &p = program_.params[param_of_.at(name)];
      KILN_ASSIGN_OR_RETURN(Tensor piece,
                            restore(state.moments, name, d, TensorType{DType::F32, p.type.shape}));
      t = p.slice > 0 ? zero_.sliceOf(piece, d) : std::move(piece);
    }
  }
  return Status::ok();
}

Tensor CheckpointIO::gather(const std::vector<ops::TensorMap> &per_device, int replica,
                            const std::string &name) const {
  std::vector<Tensor> pieces;
  for (int t = 0; t < layout_.tp(); ++t)
    pieces.push_back(per_device[deviceOfParam(replica, param_of_.at(name), t)].at(name));
  return joinShards(pieces, splitOf(name));
}

// Moment `name` of parameter i, whole: from every replica's slice (ZeRO),
// or from local replica 0's ranks.
Expected<Tensor> CheckpointIO::wholeMoment(const std::vector<ops::TensorMap> &moments, size_t i,
                                           const std::string &name) {
  const parallel::Parameter &p = program_.params[i];
  if (p.slice == 0)
    return gather(moments, 0, name);
  std::vector<Tensor> pieces;
  for (int t = 0; t < layout_.tp(); ++t) {
    KILN_ASSIGN_OR_RETURN(Tensor piece, zero_.joinReplicaSlices(moments, i, t, name, DType::F32));
    pieces.push_back(std::move(piece));
  }
  return joinShards(pieces, p.split);
}

Expected<Tensor> CheckpointIO::share(size_t i, Tensor t, DType dtype) {
  if (!link_)
    return t;
  const parallel::Parameter &p = program_.params[i];
  if (!holdsParam(i))
    t = Tensor(TensorType{dtype, joinedShape(p.type.shape, p.split, layout_.tp())});
  KILN_RETURN_IF_ERROR(link_->broadcast(t.data(), t.byteSize(), layout_.processOfStage(p.stage)));
  return t;
}

Status CheckpointIO::collect(const std::vector<ops::TensorMap> &weights,
                             const std::vector<ops::TensorMap> &moments, TrainingState &state) {
  for (size_t i = 0; i < program_.params.size(); ++i) {
    const parallel::Parameter &p = program_.params[i];
    Tensor mine;
    if (holdsParam(i) && p.weight_sliced) { // ZeRO-3: the host's whole pieces
      std::vector<Tensor> pieces;
      for (int t = 0; t < layout_.tp(); ++t)
        pieces.push_back(zero_.whole(t, p.name));
      mine = joinShards(pieces, p.split);
    } else if (holdsParam(i)) {
      mine = gather(weights, 0, p.name);
    }
    KILN_ASSIGN_OR_RETURN(Tensor whole, share(i, std::move(mine), p.type.dtype));
    state.weights.emplace(p.name, std::move(whole));
  }
  for (size_t i = 0; i < program_.params.size(); ++i) {
    for (const std::string &name : {program_.signature.moment[i], program_.signature.velocity[i]}) {
      Tensor whole;
      if (holdsParam(i)) {
        KILN_ASSIGN_OR_RETURN(whole, wholeMoment(moments, i, name));
      }
      KILN_ASSIGN_OR_RETURN(whole, share(i, std::move(whole), DType::F32));
      state.moments.emplace(name, std::move(whole));
    }
  }
  return Status::ok();
}

bool CheckpointIO::writes() const {
  return comm_.firstLocalRank() == 0 && (!link_ || link_->index() == 0);
}

Status CheckpointIO::write(const TrainingState &state, const std::string &dir, int64_t keep,
                           const CheckpointExport &exporter) {
  // The export first, the step file last: a run killed between leaves the
  // previous checkpoint as the latest, and the resumed run redoes this step
  // and its export; the other order left a checkpoint whose export was torn
  // (or missing) for good.
  if (exporter) {
    const std::string path = checkpointPath(dir, state.step);
    removeStaleTemporaries(checkpointExportDir(path), [](std::string_view) { return true; });
    KILN_RETURN_IF_ERROR(exporter(path, state));
  }
  KILN_RETURN_IF_ERROR(writeCheckpoint(dir, state).status());
  if (keep > 0)
    KILN_RETURN_IF_ERROR(pruneCheckpoints(dir, keep).status());
  return Status::ok();
}

} // namespace kiln::runtime
