#include "runtime/zero_sharder.h"

#include <utility>

#include "ir/tensor_split.h"

namespace kiln::runtime {

ZeroSharder::ZeroSharder(const std::vector<parallel::Parameter> &params, int dp, int zero,
                         const DeviceLayout &layout, Communicator &comm)
    : params_(params), dp_(dp), zero_(zero), layout_(layout), comm_(comm),
      whole_(static_cast<size_t>(layout.tp())), updated_(static_cast<size_t>(layout.devices())) {}

Tensor ZeroSharder::sliceOf(const Tensor &piece, int device) const {
  return takeFlatSlice(piece, layout_.replicaOf(device), dp_);
}

Tensor ZeroSharder::updateInput(size_t i, const Tensor &piece, int device) const {
  return params_[i].slice > 0 ? sliceOf(piece, device) : piece;
}

void ZeroSharder::holdWhole(int t, const std::string &name, Tensor piece) {
  whole_[t][name] = std::move(piece);
}

Expected<Tensor> ZeroSharder::gatherWeight(const std::string &name, int t) const {
  auto it = whole_[t].find(name);
  if (it == whole_[t].end())
    return Error("ZeRO-3: no weight '" + name + "' to gather");
  return it->second;
}

void ZeroSharder::keepUpdated(int device, const std::string &name, Tensor slice) {
  updated_[device][name] = std::move(slice);
}

Expected<Tensor> ZeroSharder::joinReplicaSlices(const std::vector<ops::TensorMap> &per_device,
                                                size_t i, int t, const std::string &name,
                                                DType dtype) {
  const parallel::Parameter &p = params_[i];
  const int replicas = comm_.localSize();
  const TensorType slice{dtype, {p.slice}};
  std::vector<Tensor> slices;
  for (int root = 0; root < dp_; ++root) {
    std::vector<Tensor> received(replicas);
    std::vector<void *> buffers;
    for (int r = 0; r < replicas; ++r) {
      const int d = deviceOfParam(r, i, t);
      received[r] = layout_.replicaOf(d) == root ? per_device[d].at(name) : Tensor(slice);
      buffers.push_back(received[r].data());
    }
    KILN_RETURN_IF_ERROR(comm_.broadcast(buffers, received[0].byteSize(), root));
    slices.push_back(std::move(received[0]));
  }
  return joinFlatSlices(slices, TensorType{dtype, p.type.shape});
}

Status ZeroSharder::allGather(std::vector<ops::TensorMap> &weights) {
  const std::vector<ops::TensorMap> &slices = weightsSliced() ? weights : updated_;
  for (int t = 0; t < layout_.tp(); ++t)
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!layout_.holdsStage(params_[i].stage))
        continue;
      const parallel::Parameter &p = params_[i];
      KILN_ASSIGN_OR_RETURN(Tensor whole, joinReplicaSlices(slices, i, t, p.name, p.type.dtype));
      if (weightsSliced()) {
        whole_[t][p.name] = std::move(whole);
        continue;
      }
      for (int r = 0; r < comm_.localSize(); ++r)
        weights[deviceOfParam(r, i, t)][p.name] = whole; // shared, not copied
    }
  for (ops::TensorMap &device : updated_)
    device.clear();
  return Status::ok();
}

} // namespace kiln::runtime
