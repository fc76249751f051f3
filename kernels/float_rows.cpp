// See float_rows.h. A bf16 row holding a value past bf16's finite range (or
// NaN, inf) is stored again element by element, so the rare row that
// rounds to inf, saturates or raises the status takes exactly storeFloat's
// path; every other row gets the same bits from the vector loop.
#include "kernels/float_rows.h"

#include <bit>
#include <cstring>

#include <immintrin.h>

#include "kernels/host_features.h"
#include "kernels/library_kernel_util.h"

namespace kiln::kernels {
namespace {

constexpr uint32_t kBf16MaxBits = 0x7f7f0000u; // bf16's largest finite value

float widenBf16(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

// Rounded to nearest even; true where |x| is past bf16's finite range or NaN.
bool narrowBf16(float x, uint16_t &bits) {
  const uint32_t f = std::bit_cast<uint32_t>(x);
  bits = static_cast<uint16_t>((f + 0x7fffu + ((f >> 16) & 1u)) >> 16);
  return (f & 0x7fffffffu) > kBf16MaxBits;
}

// The 16 low halves of the 32-bit lanes of lo and hi, in order.
__attribute__((target("avx2"))) __m256i packLowHalves(__m256i lo, __m256i hi) {
  const __m256i mask = _mm256_set1_epi32(0xffff);
  // packus saturates signed lanes: clear the upper halves first.
  const __m256i packed =
      _mm256_packus_epi32(_mm256_and_si256(lo, mask), _mm256_and_si256(hi, mask));
  return _mm256_permute4x64_epi64(packed, 0xd8); // its 128-bit lanes interleave
}

__attribute__((target("avx2"))) void widenBf16Avx2(const uint16_t *in, int64_t n, float *out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i h =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(in + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + i), _mm256_slli_epi32(h, 16));
  }
  for (; i < n; ++i)
    out[i] = widenBf16(in[i]);
}

__attribute__((target("avx2"))) __m256i roundedUpperHalves(__m256i f) {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(f, 16), _mm256_set1_epi32(1));
  return _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(f, _mm256_set1_epi32(0x7fff)), lsb),
                           16);
}

__attribute__((target("avx2"))) bool narrowBf16Avx2(const float *x, int64_t n, uint16_t *out) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i max = _mm256_set1_epi32(static_cast<int>(kBf16MaxBits));
  __m256i special = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x + i));
    const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x + i + 8));
    special = _mm256_or_si256(special, _mm256_cmpgt_epi32(_mm256_and_si256(lo, abs_mask), max));
    special = _mm256_or_si256(special, _mm256_cmpgt_epi32(_mm256_and_si256(hi, abs_mask), max));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + i),
                        packLowHalves(roundedUpperHalves(lo), roundedUpperHalves(hi)));
  }
  bool any = !_mm256_testz_si256(special, special);
  for (; i < n; ++i)
    any |= narrowBf16(x[i], out[i]);
  return any;
}

// vcvtne2ps2bf16 rounds to nearest even as narrowBf16 does, but reads a
// subnormal input as zero: a block of 32 holding one (or a value past
// bf16's range, or NaN) is narrowed element by element instead.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) bool
narrowBf16Avx512(const float *x, int64_t n, uint16_t *out) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i max = _mm512_set1_epi32(static_cast<int>(kBf16MaxBits));
  const __m512i exponent = _mm512_set1_epi32(0x7f800000);
  bool any = false;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
    const __m512i fa = _mm512_and_si512(_mm512_castps_si512(a), abs_mask);
    const __m512i fb = _mm512_and_si512(_mm512_castps_si512(b), abs_mask);
    // Past the range or NaN; or subnormal: exponent zero, not zero.
    const __mmask16 wide_a = _mm512_cmpgt_epi32_mask(fa, max),
                    wide_b = _mm512_cmpgt_epi32_mask(fb, max);
    const __mmask16 sub_a =
        _mm512_mask_testn_epi32_mask(_mm512_test_epi32_mask(fa, fa), fa, exponent);
    const __mmask16 sub_b =
        _mm512_mask_testn_epi32_mask(_mm512_test_epi32_mask(fb, fb), fb, exponent);
    if ((wide_a | wide_b | sub_a | sub_b) == 0) {
      _mm512_storeu_si512(out + i, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(b, a)));
      continue;
    }
    for (int64_t j = i; j < i + 32; ++j)
      any |= narrowBf16(x[j], out[j]);
  }
  for (; i < n; ++i)
    any |= narrowBf16(x[i], out[i]);
  return any;
}

__attribute__((target("avx2"))) bool allFiniteAvx2(const float *x, int64_t n) {
  const __m256i exponent = _mm256_set1_epi32(0x7f800000);
  __m256i special = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i f = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x + i));
    special = _mm256_or_si256(special, _mm256_cmpeq_epi32(_mm256_and_si256(f, exponent), exponent));
  }
  bool any = !_mm256_testz_si256(special, special);
  for (; i < n; ++i)
    any |= (std::bit_cast<uint32_t>(x[i]) & 0x7f800000u) == 0x7f800000u;
  return !any;
}

// Whether a value of the row is past bf16's finite range (or NaN).
bool narrowBf16Row(const float *x, int64_t n, uint16_t *out) {
  if (hostHasAvx512Bf16())
    return narrowBf16Avx512(x, n, out);
  if (hostHasAvx2())
    return narrowBf16Avx2(x, n, out);
  bool any = false;
  for (int64_t i = 0; i < n; ++i)
    any |= narrowBf16(x[i], out[i]);
  return any;
}

} // namespace

bool allFinite(const float *x, int64_t n) {
  if (hostHasAvx2())
    return allFiniteAvx2(x, n);
  for (int64_t i = 0; i < n; ++i)
    if ((std::bit_cast<uint32_t>(x[i]) & 0x7f800000u) == 0x7f800000u)
      return false;
  return true;
}

void widenRow(const void *data, DType dtype, int64_t first, int64_t n, float *out) {
  if (dtype == DType::F32) {
    std::memcpy(out, static_cast<const float *>(data) + first, static_cast<size_t>(n) * 4);
  } else if (dtype == DType::BF16 && hostHasAvx2()) {
    widenBf16Avx2(static_cast<const uint16_t *>(data) + first, n, out);
  } else {
    for (int64_t i = 0; i < n; ++i)
      out[i] = loadFloat(data, dtype, first + i);
  }
}

void narrowRow(const float *x, int64_t n, DType dtype, OverflowMode overflow, void *out,
               int64_t first) {
  bool exact = false; // stored, and no value storeFloat treats specially
  if (dtype == DType::BF16) {
    exact = !narrowBf16Row(x, n, static_cast<uint16_t *>(out) + first);
  } else if (dtype == DType::F32 && allFinite(x, n)) {
    std::memcpy(static_cast<float *>(out) + first, x, static_cast<size_t>(n) * 4);
    exact = true;
  }
  if (exact)
    return;
  for (int64_t i = 0; i < n; ++i)
    storeFloat(out, dtype, first + i, x[i], overflow);
}

} // namespace kiln::kernels
