#include "compiler/cache/sha256.h"

#include <cassert>

#include <openssl/evp.h>
#include <openssl/hmac.h>

namespace kiln::cache {

struct Sha256::Context {
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  ~Context() { EVP_MD_CTX_free(ctx); }
};

Sha256::Sha256() : context_(std::make_unique<Context>()) {
  [[maybe_unused]] int ok =
      context_->ctx && EVP_DigestInit_ex(context_->ctx, EVP_sha256(), nullptr);
  assert(ok && "OpenSSL could not start a SHA-256");
}

Sha256::~Sha256() = default;

void Sha256::update(std::string_view data) {
  [[maybe_unused]] int ok = EVP_DigestUpdate(context_->ctx, data.data(), data.size());
  assert(ok);
}

Sha256::Digest Sha256::finish() {
  Digest digest{};
  unsigned int size = 0;
  [[maybe_unused]] int ok = EVP_DigestFinal_ex(context_->ctx, digest.data(), &size);
  assert(ok && size == digest.size());
  return digest;
}

Sha256::Digest sha256(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.finish();
}

std::string toHex(const Sha256::Digest &digest) {
  static const char *kHex = "0123456789abcdef";
  std::string s;
  s.reserve(64);
  for (uint8_t b : digest) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

std::string sha256Hex(std::string_view data) { return toHex(sha256(data)); }

Sha256::Digest hmacSha256(std::string_view key, std::string_view data) {
  Sha256::Digest digest{};
  unsigned int size = 0;
  [[maybe_unused]] const unsigned char *ok =
      HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char *>(data.data()), data.size(), digest.data(), &size);
  assert(ok && size == digest.size());
  return digest;
}

} // namespace kiln::cache
