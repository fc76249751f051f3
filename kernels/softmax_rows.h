// The row steps of a softmax over f32 scores, as flash attention's host
// routines take them: the row max, x = exp(x - max) with its sum, and the
// probabilities rounded to bf16 as the cube reads them. exp is an inline
// polynomial on sixteen lanes where the host has AVX-512 (within 2 ulp),
// glibc's libmvec AVX2 form where it has AVX2 (within 4 ulp, as the code
// generator's kernels call it), libm otherwise.
#pragma once

#include <cstdint>

namespace kiln::kernels {

// The largest of x[0..n), NaN if any is NaN (checked explicitly: a vector
// max drops NaN operands), -inf for n == 0.
float rowMax(const float *x, int64_t n);

// x[i] = exp(x[i] - shift) for i < n; returns the sum of the results, added
// in a fixed order (sixteen or eight lanes, then the lanes in order, then
// the tail), so a row gives the same bits on every run of a host.
float expShiftedSum(float *x, int64_t n, float shift);

// x[i] = exp(x[i] - shift) / divisor for i < n.
void expShiftedDivide(float *x, int64_t n, float shift, float divisor);

// x[i] *= factor for i < n: the running output rescaled by a new row max.
void scaleRow(float *x, int64_t n, float factor);

// x[i] /= divisor for i < n: the output divided by the row's sum.
void divideRow(float *x, int64_t n, float divisor);

// The softmax gradient of one row of scores: ds[i] = p[i] * (ds[i] - delta)
// * scale, where ds holds dout v^T and delta is rowsum(dout * out).
void scoreGradientRow(const float *p, int64_t n, float delta, float scale, float *ds);

// x[i] rounded to bf16 (nearest even, inf past its range, NaN kept quiet)
// and back, as ir/float16.h's roundToDType with OverflowMode::InfNan; raises
// the float status for a NaN or inf result as it does.
void roundRowToBf16(float *x, int64_t n);

} // namespace kiln::kernels
