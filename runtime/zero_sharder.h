// ZeRO's slices of the trained parameters (ir/tensor_split.h takeFlatSlice):
// each data-parallel replica updates its flat equal slice of every
// parameter and keeps that slice's moments; with ZeRO-3 it keeps only its
// slice of the weight too, the whole piece on the host as the interconnect
// would deliver it. After each update the slices are all-gathered through
// the replicas' communicator (one broadcast from each replica), so that
// every process holds the same bits: into every device's weights (ZeRO-1,
// -2), or on the host as what the next step's gathers deliver (ZeRO-3).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "compiler/parallel/training_program.h"
#include "ir/tensor.h"
#include "ops/interpreter.h"
#include "runtime/communicator.h"
#include "runtime/device_layout.h"
#include "support/error.h"

namespace kiln::runtime {

class ZeroSharder {
public:
  // `params` (the program's trained parameters), `layout` and `comm` must
  // outlive the sharder; `dp` replicas in the job, ZeRO stage `zero`.
  ZeroSharder(const std::vector<parallel::Parameter> &params, int dp, int zero,
              const DeviceLayout &layout, Communicator &comm);

  int stage() const { return zero_; }
  bool weightsSliced() const { return zero_ == 3; }

  // Local device `device`'s flat slice of `piece` (a tensor-parallel rank's
  // piece of a parameter or of its moments).
  Tensor sliceOf(const Tensor &piece, int device) const;
  // What the update of parameter `i` on `device` reads of `piece`: its
  // slice with ZeRO, the whole piece without.
  Tensor updateInput(size_t i, const Tensor &piece, int device) const;

  // ZeRO-3: tensor-parallel rank `t`'s piece of weight `name`, whole on the
  // host; what a gather in the step delivers.
  void holdWhole(int t, const std::string &name, Tensor piece);
  Expected<Tensor> gatherWeight(const std::string &name, int t) const;
  const Tensor &whole(int t, const std::string &name) const { return whole_[t].at(name); }

  // ZeRO-1 and -2: the update's new slice of weight `name` on `device`,
  // kept until allGather.
  void keepUpdated(int device, const std::string &name, Tensor slice);

  // The whole of rank `t`'s piece of parameter `i`'s tensor `name` (a
  // weight or a moment, of `dtype`) from every replica's slice of it in
  // `per_device` (per local device); every process takes part.
  Expected<Tensor> joinReplicaSlices(const std::vector<ops::TensorMap> &per_device, size_t i, int t,
                                     const std::string &name, DType dtype);

  // After an update, each weight this process holds whole again from every
  // replica's new slice: into `weights` (per local device; ZeRO-1, -2), or
  // from the slices in `weights` onto the host (ZeRO-3).
  Status allGather(std::vector<ops::TensorMap> &weights);

private:
  int deviceOfParam(int local_replica, size_t i, int t) const {
    return layout_.deviceOf(local_replica, params_[i].stage, t);
  }

  const std::vector<parallel::Parameter> &params_;
  int dp_, zero_;
  const DeviceLayout &layout_;
  Communicator &comm_;
  std::vector<ops::TensorMap> whole_;   // ZeRO-3: per tensor-parallel rank
  std::vector<ops::TensorMap> updated_; // ZeRO-1, -2: per local device, until the all-gather
};

} // namespace kiln::runtime
