// The trainer's ZeRO-3: each device keeps a flat slice of every weight and
// of its moments (ir/tensor_split.h); the whole weights the step's gathers
// deliver are rebuilt on the host from every replica's slices after each
// update, through the replicas' communicator (one broadcast from each
// replica: the all-gather), so that every process holds the same bits.
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

Status Trainer::gatherWholeWeights() {
  const auto clock = Profiler::Clock::now();
  for (int t = 0; t < tp(); ++t)
    for (size_t i = 0; i < program_.params.size(); ++i) {
      const parallel::Parameter &p = program_.params[i];
      KILN_ASSIGN_OR_RETURN(whole_[t][p.name],
                            joinReplicaSlices(weights_, i, t, p.name, p.type.dtype));
    }
  profileHost(0, "all-gather", clock);
  return Status::ok();
}

} // namespace kiln::runtime
