// The trainer's ZeRO: each device updates its flat equal slice of every
// parameter and keeps that slice's moments (ir/tensor_split.h); with ZeRO-3
// it keeps only its slice of the weight too. After each update the slices
// are all-gathered through the replicas' communicator (one broadcast from
// each replica), so that every process holds the same bits: into every
// device's weights (ZeRO-1, -2), or on the host as what the next step's
// gathers deliver (ZeRO-3).
#include "runtime/trainer.h"

namespace kiln::runtime {

Expected<Tensor> Trainer::joinReplicaSlices(const std::vector<ops::TensorMap> &per_device, size_t i,
                                            int t, const std::string &name, DType dtype) {
  const parallel::Parameter &p = program_.params[i];
  const int replicas = comm_->localSize();
  const TensorType slice{dtype, {p.slice}};
  std::vector<Tensor> slices;
  for (int root = 0; root < program_.parallel.dp; ++root) {
    std::vector<Tensor> received(replicas);
    std::vector<void *> buffers;
    for (int r = 0; r < replicas; ++r) {
      const int d = deviceOfParam(r, i, t);
      received[r] = replicaOf(d) == root ? per_device[d].at(name) : Tensor(slice);
      buffers.push_back(received[r].data());
    }
    KILN_RETURN_IF_ERROR(comm_->broadcast(buffers, received[0].byteSize(), root));
    slices.push_back(std::move(received[0]));
  }
  return joinFlatSlices(slices, TensorType{dtype, p.type.shape});
}

Status Trainer::allGatherWeights() {
  const auto clock = Profiler::Clock::now();
  const std::vector<ops::TensorMap> &slices = zero3() ? weights_ : updated_slices_;
  for (int t = 0; t < tp(); ++t)
    for (size_t i = 0; i < program_.params.size(); ++i) {
      if (!holdsParam(i))
        continue;
      const parallel::Parameter &p = program_.params[i];
      KILN_ASSIGN_OR_RETURN(Tensor whole, joinReplicaSlices(slices, i, t, p.name, p.type.dtype));
      if (zero3()) {
        whole_[t][p.name] = std::move(whole);
        continue;
      }
      for (int r = 0; r < comm_->localSize(); ++r)
        weights_[deviceOfParam(r, i, t)][p.name] = whole; // shared, not copied
    }
  for (ops::TensorMap &device : updated_slices_)
    device.clear();
  profileHost(0, "all-gather", clock);
  return Status::ok();
}

} // namespace kiln::runtime
