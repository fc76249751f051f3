// The one exp of kiln's generated kernels and host routines:
// 2^n p(r) with n = round(x log2 e) and r = x - n ln 2 (ln 2 in two parts,
// Cody and Waite), p Cephes' degree-7 polynomial on |r| <= ln 2 / 2,
// within 2 ulp of exp. Arguments below kUnderflow give 0 (exp rounds to 0
// in f32 below 2^-150), past kOverflowClamp inf, NaN stays NaN. The host
// routines evaluate it with AVX-512 intrinsics (softmax_rows.cpp), the code
// generator as scalar IR that LLVM vectorises (llvm_scalar_ops.cpp): the
// same operations in the same order, so the same bits.
#pragma once

namespace kiln::kernels::exp_polynomial {

inline constexpr float kUnderflow = -104.0f;
inline constexpr float kOverflowClamp = 88.8f; // exp of it is past f32's largest
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2High = 0.693359375f, kLn2Low = -2.12194440e-4f;
// p(r) = 1 + r + r^2 (c[5] + r (c[4] + ... r c[0])), Horner from c[0].
inline constexpr float kCoefficients[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                           4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

} // namespace kiln::kernels::exp_polynomial
