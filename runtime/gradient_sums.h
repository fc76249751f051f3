// A step's gradient sums, per local device and parameter: each
// micro-batch's gradient added in f32 (the first becomes the sum; one kept
// in its dtype, ZeRO-2's, stays so until the reduction), then each
// parameter's sums added over the data-parallel replicas in rank order.
#pragma once

#include <cstddef>
#include <vector>

#include "ir/tensor.h"
#include "runtime/communicator.h"
#include "support/error.h"

namespace kiln::runtime {

class GradientSums {
public:
  // Empty sums for `devices` devices of `params` parameters.
  void reset(int devices, size_t params) { sums_.assign(devices, std::vector<Tensor>(params)); }

  // Adds micro-batch `k`'s gradient `g` of parameter `i` into device `d`'s
  // sum: for k == 0 it becomes the sum, in f32 unless `keep_dtype`.
  void add(int d, size_t i, Tensor g, int k, bool keep_dtype);

  Tensor &at(int d, size_t i) { return sums_[d][i]; }
  const Tensor &at(int d, size_t i) const { return sums_[d][i]; }

  // Parameter `i`'s sums on `devices` (one per local replica, in rank
  // order) summed over every replica of the job through `comm`, in f32, in
  // place: each of them then holds the whole sum (with `first_only`, the
  // first of them; the others are left as they were).
  Status sumOverReplicas(Communicator &comm, const std::vector<int> &devices, size_t i,
                         bool first_only = false);

private:
  std::vector<std::vector<Tensor>> sums_; // per device, per parameter
};

} // namespace kiln::runtime
