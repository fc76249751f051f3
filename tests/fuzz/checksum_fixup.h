// Artifacts and cache entries end in a SHA-256 of the bytes before it; a
// fuzzer that kept it would never get past the check. The targets replace
// the last 32 bytes of the input with the right sum, so mutations reach the
// parsing behind it (the check itself has unit tests).
#pragma once

#include <cstring>
#include <string>
#include <string_view>

#include "compiler/cache/sha256.h"

namespace kiln::fuzz {

inline std::string withValidChecksum(std::string_view input) {
  std::string bytes(input);
  if (bytes.size() < 32)
    return bytes;
  const size_t body = bytes.size() - 32;
  const cache::Sha256::Digest sum = cache::sha256(std::string_view(bytes).substr(0, body));
  std::memcpy(bytes.data() + body, sum.data(), sum.size());
  return bytes;
}

} // namespace kiln::fuzz
