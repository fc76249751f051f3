// Rows of a kernel buffer widened to f32 and f32 rows rounded back, as
// library_kernel_util.h's loadFloat and storeFloat do one element at a time:
// the same values and the same float status, vectorised where the host has
// AVX2. The host routines' blocks go through these instead of a switch per
// element.
#pragma once

#include <cstdint>

#include "ir/dtype.h"

namespace kiln::kernels {

// out[i] = element `first + i` of `data` (of `dtype`: F32, F16 or BF16) as
// f32, for i < n.
void widenRow(const void *data, DType dtype, int64_t first, int64_t n, float *out);

// Element `first + i` of `out` (of `dtype`) = x[i] rounded to it under
// `overflow`, for i < n; raises the float status where storeFloat would.
void narrowRow(const float *x, int64_t n, DType dtype, OverflowMode overflow, void *out,
               int64_t first);

// Whether no x[i], i < n, is inf or NaN.
bool allFinite(const float *x, int64_t n);

} // namespace kiln::kernels
