// Which elements dropout keeps: a pure function of the seed, the stream (one
// per dropout site) and the element's index, so the reference kernel and the
// compiled kernel drop the same elements, the gradient drops what the
// forward dropped, and a resumed run draws what an unbroken one did.
#pragma once

#include <cstdint>

#include "support/splitmix.h"

namespace kiln {

// Element `index` survives dropout with probability 1 - p: a uniform double
// in [0, 1) from the top 53 bits of the hash, kept when it is >= p.
inline bool dropoutKeeps(uint64_t seed, int64_t stream, int64_t index, double p) {
  const uint64_t h = splitmix64(
      seed ^ splitmix64(static_cast<uint64_t>(stream) ^ splitmix64(static_cast<uint64_t>(index))));
  return static_cast<double>(h >> 11) * 0x1.0p-53 >= p;
}

// The survivors' scale, 1 / (1 - p), applied in f32 as x * scale.
inline float dropoutScale(double p) { return static_cast<float>(1.0 / (1.0 - p)); }

} // namespace kiln
