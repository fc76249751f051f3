// What the host's vector units offer, asked once: the host routines pick
// their AVX2 loops by it and fall back to plain C++ elsewhere.
#pragma once

namespace kiln::kernels {

inline bool hostHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

// AVX-512F: libmvec's 16-lane exp (_ZGVeN16v_expf) runs there.
inline bool hostHasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

} // namespace kiln::kernels
