// Fixed-width little-endian integers in a byte string: the header fields of
// kiln's binary files (kernel-cache entries, artifacts), the same on every host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

// Appends the low `width` bytes of `v`, least significant first.
inline void putLE(std::string &out, uint64_t v, int width) {
  for (int i = 0; i < width; ++i)
    out.push_back(char(uint8_t(v >> (8 * i))));
}

// The `width`-byte integer at `offset` (the caller checked the bounds).
inline uint64_t getLE(std::string_view bytes, size_t offset, int width) {
  uint64_t v = 0;
  for (int i = 0; i < width; ++i)
    v |= uint64_t(uint8_t(bytes[offset + i])) << (8 * i);
  return v;
}

} // namespace kiln
