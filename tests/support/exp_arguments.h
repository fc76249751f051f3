// exp's arguments for the tests of its two forms (the host routines' and
// the generated kernels'): every 1999th f32 from the largest argument that
// underflows (-104) to the smallest that overflows (88.8), down the
// negative bit patterns to -0 and then up the positive ones.
#pragma once

#include <bit>
#include <cstdint>
#include <vector>

namespace kiln::testing {

inline std::vector<float> expArguments() {
  std::vector<float> args;
  for (float x = -104.0f; x < 88.8f;) {
    args.push_back(x);
    const int32_t bits = std::bit_cast<int32_t>(x);
    x = bits < 0 ? (bits - 1999 > std::bit_cast<int32_t>(-0.0f) ? std::bit_cast<float>(bits - 1999)
                                                                : 0.0f)
                 : std::bit_cast<float>(bits + 1999);
  }
  return args;
}

} // namespace kiln::testing
