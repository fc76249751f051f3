#include "runtime/gradient_norm.h"

namespace kiln::runtime {
namespace {

// In eight independent partial sums, which the CPU can overlap.
double sumOfSquares(const float *p, int64_t n) {
  double part[8] = {};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    for (int j = 0; j < 8; ++j)
      part[j] += static_cast<double>(p[k + j]) * p[k + j];
  for (; k < n; ++k)
    part[0] += static_cast<double>(p[k]) * p[k];
  double sum = 0;
  for (double s : part)
    sum += s;
  return sum;
}

} // namespace

std::vector<double> squaresOf(ThreadPool &pool, const std::vector<const Tensor *> &gradients) {
  std::vector<double> squares(gradients.size());
  pool.parallelFor(static_cast<int64_t>(gradients.size()), [&](int64_t i, int) {
    squares[i] = sumOfSquares(gradients[i]->dataAs<float>(), gradients[i]->numElements());
  });
  return squares;
}

double sumOfSquares(ThreadPool &pool, const std::vector<const Tensor *> &gradients) {
  double sum = 0;
  for (double s : squaresOf(pool, gradients))
    sum += s;
  return sum;
}

} // namespace kiln::runtime
