// See softmax_rows.h. exp arguments below -104 (exp rounds to 0 in f32)
// take 0 directly: libmvec sends a whole vector holding one underflowing
// argument (a masked score: -inf minus the row max) to its scalar fallback.
#include "kernels/softmax_rows.h"

#include <bit>
#include <cmath>
#include <limits>

#include <immintrin.h>

#include "ir/float_status.h"
#include "kernels/exp_polynomial.h"
#include "kernels/host_features.h"

// libmvec's AVX2 exp (declared with its target so the vector argument passes
// in a register as its ABI says).
extern "C" __attribute__((target("avx2,fma"))) __m256 _ZGVdN8v_expf(__m256);

namespace kiln::kernels {
namespace {

constexpr float kUnderflow = exp_polynomial::kUnderflow;

float scalarExp(float x) { return x < kUnderflow ? 0.0f : std::exp(x); }

__attribute__((target("avx2,fma"))) __m256 exp8(__m256 x) {
  const __m256 underflows = _mm256_cmp_ps(x, _mm256_set1_ps(kUnderflow), _CMP_LT_OQ);
  const __m256 e = _ZGVdN8v_expf(_mm256_andnot_ps(underflows, x));
  return _mm256_andnot_ps(underflows, e);
}

// exp_polynomial.h's exp on sixteen lanes, inline; 2^n by scalef (one
// rounding, so results in the subnormal range round once). libmvec's call
// took half of the forward routine's non-GEMM time. NaN stays NaN (vminps
// returns its second operand for NaN).
__attribute__((target("avx512f"), always_inline)) inline __m512 exp16(__m512 x) {
  namespace ep = exp_polynomial;
  const __mmask16 kept = _mm512_cmp_ps_mask(x, _mm512_set1_ps(ep::kUnderflow), _CMP_NLT_UQ);
  // The all-lanes masked forms: GCC 12 reads the plain forms' undefined
  // pass-through as uninitialised (-Werror).
  const __m512 zero = _mm512_setzero_ps();
  constexpr __mmask16 all = 0xffff;
  x = _mm512_mask_min_ps(zero, all, _mm512_set1_ps(ep::kOverflowClamp), x);
  const __m512 n =
      _mm512_mask_roundscale_ps(zero, all, _mm512_mul_ps(x, _mm512_set1_ps(ep::kLog2e)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(ep::kLn2High), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(ep::kLn2Low), r);
  __m512 p = _mm512_set1_ps(ep::kCoefficients[0]);
  for (int i = 1; i < 6; ++i)
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ep::kCoefficients[i]));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
  p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
  return _mm512_maskz_mov_ps(kept, _mm512_mask_scalef_ps(zero, all, p, n));
}

// The sixteen lanes of `v` added in lane order.
__attribute__((target("avx512f"))) float laneSum16(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float sum = 0;
  for (float lane : lanes)
    sum += lane;
  return sum;
}

__attribute__((target("avx512f"))) float expShiftedSumAvx512(float *x, int64_t n, float shift) {
  const __m512 s = _mm512_set1_ps(shift);
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), s));
    _mm512_storeu_ps(x + i, e);
    acc = _mm512_add_ps(acc, e);
  }
  float sum = laneSum16(acc);
  for (; i < n; ++i)
    sum += (x[i] = scalarExp(x[i] - shift));
  return sum;
}

__attribute__((target("avx512f"))) void expShiftedDivideAvx512(float *x, int64_t n, float shift,
                                                               float divisor) {
  const __m512 s = _mm512_set1_ps(shift), d = _mm512_set1_ps(divisor);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(x + i, _mm512_div_ps(exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), s)), d));
  for (; i < n; ++i)
    x[i] = scalarExp(x[i] - shift) / divisor;
}

// The eight lanes of `v` added in lane order.
__attribute__((target("avx2,fma"))) float laneSum(__m256 v) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  float sum = 0;
  for (float lane : lanes)
    sum += lane;
  return sum;
}

__attribute__((target("avx2,fma"))) float rowMaxAvx2(const float *x, int64_t n) {
  __m256 m = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 nan = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    m = _mm256_max_ps(v, m);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  float result = lanes[0];
  for (float lane : lanes)
    result = std::max(result, lane);
  bool any_nan = _mm256_movemask_ps(nan) != 0;
  for (; i < n; ++i) {
    any_nan |= std::isnan(x[i]);
    result = std::max(result, x[i]);
  }
  return any_nan ? std::numeric_limits<float>::quiet_NaN() : result;
}

__attribute__((target("avx2,fma"))) float expShiftedSumAvx2(float *x, int64_t n, float shift) {
  const __m256 s = _mm256_set1_ps(shift);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), s));
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  float sum = laneSum(acc);
  for (; i < n; ++i)
    sum += (x[i] = scalarExp(x[i] - shift));
  return sum;
}

__attribute__((target("avx2,fma"))) void expShiftedDivideAvx2(float *x, int64_t n, float shift,
                                                              float divisor) {
  const __m256 s = _mm256_set1_ps(shift), d = _mm256_set1_ps(divisor);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_div_ps(exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), s)), d));
  for (; i < n; ++i)
    x[i] = scalarExp(x[i] - shift) / divisor;
}

__attribute__((target("avx2,fma"))) void scaleRowAvx2(float *x, int64_t n, float factor) {
  const __m256 f = _mm256_set1_ps(factor);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), f));
  for (; i < n; ++i)
    x[i] *= factor;
}

__attribute__((target("avx2,fma"))) void divideRowAvx2(float *x, int64_t n, float divisor) {
  const __m256 d = _mm256_set1_ps(divisor);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_div_ps(_mm256_loadu_ps(x + i), d));
  for (; i < n; ++i)
    x[i] /= divisor;
}

float scoreGradient(float p, float ds, float delta, float scale) {
  return p * (ds - delta) * scale;
}

__attribute__((target("avx2,fma"))) void scoreGradientRowAvx2(const float *p, int64_t n,
                                                              float delta, float scale, float *ds) {
  const __m256 d = _mm256_set1_ps(delta), s = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_sub_ps(_mm256_loadu_ps(ds + i), d);
    _mm256_storeu_ps(ds + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(p + i), g), s));
  }
  for (; i < n; ++i)
    ds[i] = scoreGradient(p[i], ds[i], delta, scale);
}

// roundRowToBf16's bits for one element; returns whether the result is NaN
// or inf.
uint32_t roundBitsToBf16(float &x) {
  const uint32_t f = std::bit_cast<uint32_t>(x);
  const bool is_nan = (f & 0x7fffffffu) > 0x7f800000u;
  const uint32_t r =
      is_nan ? (f | 0x00400000u) & 0xffff0000u : (f + 0x7fffu + ((f >> 16) & 1u)) & 0xffff0000u;
  x = std::bit_cast<float>(r);
  return is_nan || (r & 0x7f800000u) == 0x7f800000u;
}

__attribute__((target("avx2,fma"))) uint32_t roundRowToBf16Avx2(float *x, int64_t n) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  const __m256i half = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
  const __m256i quiet_bit = _mm256_set1_epi32(0x00400000);
  __m256i special = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i f = _mm256_castps_si256(_mm256_loadu_ps(x + i));
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(f, abs_mask), inf);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(f, 16), one);
    const __m256i rounded =
        _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(f, half), lsb), high);
    const __m256i quiet = _mm256_and_si256(_mm256_or_si256(f, quiet_bit), high);
    const __m256i r = _mm256_blendv_epi8(rounded, quiet, is_nan);
    special = _mm256_or_si256(
        special, _mm256_or_si256(is_nan, _mm256_cmpeq_epi32(_mm256_and_si256(r, inf), inf)));
    _mm256_storeu_ps(x + i, _mm256_castsi256_ps(r));
  }
  uint32_t any = !_mm256_testz_si256(special, special);
  for (; i < n; ++i)
    any |= roundBitsToBf16(x[i]);
  return any;
}

} // namespace

float rowMax(const float *x, int64_t n) {
  if (hostHasAvx2())
    return rowMaxAvx2(x, n);
  float result = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i]))
      return x[i];
    result = std::max(result, x[i]);
  }
  return result;
}

float expShiftedSum(float *x, int64_t n, float shift) {
  if (hostHasAvx512())
    return expShiftedSumAvx512(x, n, shift);
  if (hostHasAvx2())
    return expShiftedSumAvx2(x, n, shift);
  float sum = 0;
  for (int64_t i = 0; i < n; ++i)
    sum += (x[i] = scalarExp(x[i] - shift));
  return sum;
}

void expShiftedDivide(float *x, int64_t n, float shift, float divisor) {
  if (hostHasAvx512())
    return expShiftedDivideAvx512(x, n, shift, divisor);
  if (hostHasAvx2())
    return expShiftedDivideAvx2(x, n, shift, divisor);
  for (int64_t i = 0; i < n; ++i)
    x[i] = scalarExp(x[i] - shift) / divisor;
}

void scaleRow(float *x, int64_t n, float factor) {
  if (hostHasAvx2())
    return scaleRowAvx2(x, n, factor);
  for (int64_t i = 0; i < n; ++i)
    x[i] *= factor;
}

void divideRow(float *x, int64_t n, float divisor) {
  if (hostHasAvx2())
    return divideRowAvx2(x, n, divisor);
  for (int64_t i = 0; i < n; ++i)
    x[i] /= divisor;
}

void scoreGradientRow(const float *p, int64_t n, float delta, float scale, float *ds) {
  if (hostHasAvx2())
    return scoreGradientRowAvx2(p, n, delta, scale, ds);
  for (int64_t i = 0; i < n; ++i)
    ds[i] = scoreGradient(p[i], ds[i], delta, scale);
}

void roundRowToBf16(float *x, int64_t n) {
  uint32_t special = 0;
  if (hostHasAvx2()) {
    special = roundRowToBf16Avx2(x, n);
  } else {
    for (int64_t i = 0; i < n; ++i)
      special |= roundBitsToBf16(x[i]);
  }
  if (special) // raised once for the row, as the scalar rounding would
    raiseFloatStatus();
}

} // namespace kiln::kernels
