// SHA-256 for kernel-cache keys and checksums, and HMAC-SHA-256 for
// authenticating entries, from OpenSSL's libcrypto.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace kiln::cache {

class Sha256 {
public:
  using Digest = std::array<uint8_t, 32>;

  Sha256();
  ~Sha256();
  Sha256(const Sha256 &) = delete;
  Sha256 &operator=(const Sha256 &) = delete;

  void update(std::string_view data);
  // Finishes the hash; the object must not be updated afterwards.
  Digest finish();

private:
  struct Context;
  std::unique_ptr<Context> context_;
};

Sha256::Digest sha256(std::string_view data);
std::string toHex(const Sha256::Digest &digest);
// Lower-case hex SHA-256 of `data`.
std::string sha256Hex(std::string_view data);
// HMAC-SHA-256 of `data` under `key` (RFC 2104).
Sha256::Digest hmacSha256(std::string_view key, std::string_view data);

} // namespace kiln::cache
