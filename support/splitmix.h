// splitmix64's finaliser: a cheap, well-mixed 64-bit hash, so nearby seeds
// (step numbers, indices) give unrelated random streams. The same on every
// platform and standard library, unlike std::hash.
#pragma once

#include <cstdint>

namespace kiln {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

} // namespace kiln
