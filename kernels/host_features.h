// What the host's vector units offer, asked once: the host routines pick
// their AVX2 loops by it and fall back to plain C++ elsewhere.
#pragma once

namespace kiln::kernels {

inline bool hostHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

// AVX-512F: the 16-lane exp of softmax_rows.cpp runs there.
inline bool hostHasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

// AVX512-BF16 (with AVX512BW's 16-bit stores): float rows narrow to bf16
// by vcvtne2ps2bf16.
inline bool hostHasAvx512Bf16() {
  static const bool has =
      __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw");
  return has;
}

} // namespace kiln::kernels
