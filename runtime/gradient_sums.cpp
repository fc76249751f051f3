#include "runtime/gradient_sums.h"

#include <utility>

namespace kiln::runtime {

void GradientSums::add(int d, size_t i, Tensor g, int k, bool keep_dtype) {
  Tensor f32 = g.dtype() == DType::F32 || keep_dtype ? std::move(g) : g.castTo(DType::F32);
  Tensor &sum = sums_[d][i];
  if (k == 0) {
    sum = std::move(f32);
    return;
  }
  float *to = sum.dataAs<float>();
  const float *from = std::as_const(f32).dataAs<float>();
  for (int64_t j = 0; j < sum.numElements(); ++j)
    to[j] += from[j];
}

Status GradientSums::sumOverReplicas(Communicator &comm, const std::vector<int> &devices, size_t i,
                                     bool first_only) {
  std::vector<float *> buffers;
  for (int d : devices) {
    Tensor &g = sums_[d][i];
    if (g.dtype() != DType::F32)
      g = g.castTo(DType::F32); // exact: the sum runs in f32 from the step's values
    buffers.push_back(g.dataAs<float>());
  }
  const int64_t n = sums_[devices.front()][i].numElements();
  return first_only ? comm.reduceSumToFirst(buffers, n) : comm.allReduceSum(buffers, n);
}

} // namespace kiln::runtime
