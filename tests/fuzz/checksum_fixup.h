// Cache entries end in an HMAC, artifacts in a SHA-256 and an Ed25519
// signature; a fuzzer that kept them would never get past the checks. The
// targets make the trailer valid under fixed fuzzing keys, so mutations
// reach the parsing behind it (the checks themselves have unit tests).
#pragma once

#include <cstring>
#include <string>
#include <string_view>

#include "compiler/artifact/artifact.h"
#include "compiler/artifact/artifact_signing.h"
#include "compiler/cache/sha256.h"

namespace kiln::fuzz {

inline constexpr std::string_view kCacheSecret = "kiln's fuzzing cache secret, 32b";

// The last 32 bytes become the HMAC of the rest under kCacheSecret.
inline std::string withValidEntryMac(std::string_view input) {
  std::string bytes(input);
  if (bytes.size() < 32)
    return bytes;
  const size_t body = bytes.size() - 32;
  const cache::Sha256::Digest mac =
      cache::hmacSha256(kCacheSecret, std::string_view(bytes).substr(0, body));
  std::memcpy(bytes.data() + body, mac.data(), mac.size());
  return bytes;
}

// One key for the whole run.
inline const artifact::SigningKey &signingKey() {
  static const artifact::SigningKey key = artifact::SigningKey::generate().value();
  return key;
}

// The 32 bytes before the last 96 become the SHA-256 of what precedes them,
// and the last 96 the signer and signature of everything before.
inline std::string withValidArtifactTrailer(std::string_view input) {
  std::string bytes(input);
  const size_t trailer = artifact::kArtifactChecksumSize + artifact::kArtifactSignatureSize;
  if (bytes.size() < trailer)
    return bytes;
  const size_t body = bytes.size() - trailer;
  const cache::Sha256::Digest sum = cache::sha256(std::string_view(bytes).substr(0, body));
  std::memcpy(bytes.data() + body, sum.data(), sum.size());
  bytes.resize(body + artifact::kArtifactChecksumSize);
  bytes += signingKey().publicKey() + *signingKey().sign(bytes);
  return bytes;
}

} // namespace kiln::fuzz
