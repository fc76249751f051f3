#include "kernels/row_sums.h"

#include <vector>

#include "ir/float_status.h"
#include "kernels/library_kernel_util.h"

namespace kiln::kernels {

uint32_t combineRowSums(const float *partials, int64_t tiles, int64_t elements, void *out,
                        DType dtype, OverflowMode overflow) {
  std::vector<float> sum(partials, partials + (tiles > 0 ? elements : 0));
  if (tiles <= 0)
    sum.assign(static_cast<size_t>(elements), 0.0f);
  for (int64_t t = 1; t < tiles; ++t) {
    const float *part = partials + t * elements;
    for (int64_t j = 0; j < elements; ++j)
      sum[j] += part[j];
  }
  takeFloatStatus();
  for (int64_t j = 0; j < elements; ++j)
    storeFloat(out, dtype, j, sum[j], overflow);
  return takeFloatStatus();
}

} // namespace kiln::kernels
