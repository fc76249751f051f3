// Loads and stores of the library routines (library_kernels.h): elements of
// a kernel buffer of any float dtype read as f32, and results rounded and
// stored as the generated kernels store them, raising the float status.
#pragma once

#include <atomic>
#include <cstdint>

#include "ir/dtype.h"
#include "ir/float16.h"

namespace kiln::kernels {

inline float loadFloat(const void *data, DType dtype, int64_t i) {
  switch (dtype) {
  case DType::F16:
    return halfToFloat(static_cast<const uint16_t *>(data)[i]);
  case DType::BF16:
    return bfloat16ToFloat(static_cast<const uint16_t *>(data)[i]);
  default:
    return static_cast<const float *>(data)[i];
  }
}

inline int64_t loadIndex(const void *data, DType dtype, int64_t i) {
  return dtype == DType::I32 ? static_cast<const int32_t *>(data)[i]
                             : static_cast<const int64_t *>(data)[i];
}

inline void publish(uint32_t *status, uint32_t bits) {
  if (bits)
    std::atomic_ref<uint32_t>(*status).fetch_or(bits, std::memory_order_relaxed);
}

// Rounds and stores value `v` as element i of `out` (of `dtype`), as the
// generated kernels' store does.
inline void storeFloat(void *out, DType dtype, int64_t i, float v, OverflowMode overflow) {
  switch (dtype) {
  case DType::F16:
    static_cast<uint16_t *>(out)[i] = floatToHalf(v, overflow);
    break;
  case DType::BF16:
    static_cast<uint16_t *>(out)[i] = floatToBFloat16(v, overflow);
    break;
  default:
    static_cast<float *>(out)[i] = roundToDType(v, DType::F32, overflow);
  }
}

} // namespace kiln::kernels
