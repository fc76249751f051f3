#include "kernels/library_kernels.h"

#include <atomic>
#include <bit>
#include <cstring>
#include <vector>

#include "ir/dropout_mask.h"
#include "ir/dtype.h"
#include "ir/float16.h"
#include "ir/float_status.h"
#include "kernels/flash_attention_routines.h"
#include "kernels/float_rows.h"
#include "kernels/library_kernel_util.h"

namespace kiln::kernels {
namespace {

// roundToDType(x, F32, overflow) over sums[0..n): in INFNAN mode the values
// stay and one look for a non-finite one raises the status (a loop the
// compiler vectorises, not a call per element).
void roundF32Sums(float *sums, int64_t n, OverflowMode overflow) {
  if (overflow != OverflowMode::InfNan) {
    for (int64_t i = 0; i < n; ++i)
      sums[i] = roundToDType(sums[i], DType::F32, overflow);
    return;
  }
  uint32_t special = 0;
  for (int64_t i = 0; i < n; ++i)
    special |= (std::bit_cast<uint32_t>(sums[i]) & 0x7f800000u) == 0x7f800000u;
  if (special)
    raiseFloatStatus();
}

extern "C" void kilnEmbeddingGrad(void **buffers, int64_t row_begin, int64_t row_end,
                                  uint32_t *status, const int64_t *args) {
  const void *dy = buffers[args[0]];
  const void *indices = buffers[args[1]];
  void *dtable = buffers[args[2]];
  const auto dy_dtype = static_cast<DType>(args[3]);
  const auto index_dtype = static_cast<DType>(args[4]);
  const auto out_dtype = static_cast<DType>(args[5]);
  const int64_t tokens = args[6], row = args[7];
  const auto overflow = static_cast<OverflowMode>(args[8]);
  if (row_end <= row_begin)
    return;
  // The sums of rows [row_begin, row_end), in f32: in the output itself
  // when it is f32, else in a buffer rounded into it at the end. Only the
  // rows some token adds into are summed and rounded; the others stay 0,
  // which every dtype and overflow mode stores as 0.
  const int64_t rows = row_end - row_begin;
  std::vector<float> buffer;
  float *sum = static_cast<float *>(dtable) + row_begin * row;
  if (out_dtype != DType::F32) {
    buffer.resize(static_cast<size_t>(rows * row));
    sum = buffer.data();
  }
  std::memset(sum, 0, static_cast<size_t>(rows * row) * sizeof(float));
  std::vector<char> touched(static_cast<size_t>(rows), 0);
  std::vector<float> widened(dy_dtype == DType::F32 ? 0 : static_cast<size_t>(row));
  for (int64_t p = 0; p < tokens; ++p) {
    const int64_t v = loadIndex(indices, index_dtype, p);
    if (v < row_begin || v >= row_end)
      continue;
    touched[v - row_begin] = 1;
    float *to = sum + (v - row_begin) * row;
    const float *from = widened.data();
    if (dy_dtype == DType::F32)
      from = static_cast<const float *>(dy) + p * row;
    else // widened exactly, by the vector loop
      widenRow(dy, dy_dtype, p * row, row, widened.data());
    for (int64_t j = 0; j < row; ++j)
      to[j] += from[j];
  }
  // The generated kernels' store: the job's rounding, and the float status
  // where it overflows.
  takeFloatStatus();
  for (int64_t r = 0; r < rows; ++r) {
    float *row_sum = sum + r * row;
    if (out_dtype == DType::F32) { // the sums are the output; an untouched row is 0 already
      if (touched[r])
        roundF32Sums(row_sum, row, overflow);
      continue;
    }
    auto *out = static_cast<uint16_t *>(dtable) + (row_begin + r) * row;
    if (!touched[r]) {
      std::memset(out, 0, static_cast<size_t>(row) * sizeof(uint16_t));
      continue;
    }
    for (int64_t j = 0; j < row; ++j)
      out[j] = out_dtype == DType::F16 ? floatToHalf(row_sum[j], overflow)
                                       : floatToBFloat16(row_sum[j], overflow);
  }
  publish(status, takeFloatStatus());
}

extern "C" void kilnDropout(void **buffers, int64_t row_begin, int64_t row_end, uint32_t *status,
                            const int64_t *args) {
  const void *x = buffers[args[0]];
  const auto seed = static_cast<uint64_t>(*static_cast<const int64_t *>(buffers[args[1]]));
  void *y = buffers[args[2]];
  const auto x_dtype = static_cast<DType>(args[3]);
  const auto y_dtype = static_cast<DType>(args[4]);
  const int64_t cols = args[5];
  const double p = std::bit_cast<double>(args[6]);
  const int64_t stream = args[7];
  const auto overflow = static_cast<OverflowMode>(args[8]);
  const float scale = dropoutScale(p);
  takeFloatStatus();
  for (int64_t i = row_begin * cols; i < row_end * cols; ++i)
    storeFloat(y, y_dtype, i,
               dropoutKeeps(seed, stream, i, p) ? loadFloat(x, x_dtype, i) * scale : 0.0f,
               overflow);
  publish(status, takeFloatStatus());
}

} // namespace

const std::vector<LibraryKernel> &libraryKernels() {
  static const std::vector<LibraryKernel> kernels = {
      {kEmbeddingGradRoutine, &kilnEmbeddingGrad},
      {kDropoutRoutine, &kilnDropout},
      {kFlashAttentionRoutine, &kilnFlashAttention},
      {kFlashAttentionGradRoutine, &kilnFlashAttentionGrad},
  };
  return kernels;
}

} // namespace kiln::kernels
