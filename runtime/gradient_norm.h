// The global gradient norm's sum of squares: each f32 gradient summed in
// double, in parallel, the per-gradient sums added in a fixed order, so the
// result is the same every run. A value that is not finite makes the sum
// so, which is how the trainer sees an INFNAN overflow in the gradients.
#pragma once

#include <vector>

#include "ir/tensor.h"
#include "support/thread_pool.h"

namespace kiln::runtime {

double sumOfSquares(ThreadPool &pool, const std::vector<const Tensor *> &gradients);
// Each gradient's own sum of squares (what sumOfSquares adds in order).
std::vector<double> squaresOf(ThreadPool &pool, const std::vector<const Tensor *> &gradients);

} // namespace kiln::runtime
