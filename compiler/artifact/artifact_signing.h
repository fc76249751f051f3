// Who built an artifact, and whether this user trusts them. An artifact
// holds native code: its SHA-256 only catches damage, since anyone can
// recompute it, so every artifact is signed (Ed25519, OpenSSL) over all its
// bytes, and `kiln run` / `kiln inspect` load one only when its signer is
// trusted: this user's own key, or one added with `kiln keys trust`.
//
// Files, in kiln's key folder (compiler/cache/key_files.h):
//   signing.key    this user's private key, PKCS#8 PEM, created 0600 on
//                  first use
//   trusted_keys   one trusted public key a line: 64 hex digits, then an
//                  optional name; '#' starts a comment
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "support/error.h"

namespace kiln::artifact {

inline constexpr size_t kPublicKeySize = 32;
inline constexpr size_t kSignatureSize = 64;

class SigningKey {
public:
  // This user's key, created on first use.
  static Expected<SigningKey> loadOrCreate();
  // A fresh key held in memory only (tests, fuzzing).
  static Expected<SigningKey> generate();
  // The key in `pem` (PKCS#8), `source` naming it in errors.
  static Expected<SigningKey> fromPem(std::string_view pem, const std::string &source);

  SigningKey(SigningKey &&) noexcept;
  SigningKey &operator=(SigningKey &&) noexcept;
  ~SigningKey();

  const std::string &publicKey() const { return public_key_; } // 32 raw bytes
  const std::string &path() const { return path_; }            // empty: not from a file
  Expected<std::string> sign(std::string_view data) const;     // 64 bytes
  Expected<std::string> toPem() const;

private:
  struct Impl;
  SigningKey(std::unique_ptr<Impl> impl, std::string public_key, std::string path);
  std::unique_ptr<Impl> impl_;
  std::string public_key_;
  std::string path_;
};

bool verifySignature(std::string_view public_key, std::string_view data,
                     std::string_view signature);

// 64 lower-case hex digits, and back (an error names what is wrong).
std::string publicKeyHex(std::string_view public_key);
Expected<std::string> parsePublicKeyHex(std::string_view hex);
// A short name for messages: the first 16 hex digits of the key's SHA-256.
std::string keyFingerprint(std::string_view public_key);

struct TrustedKey {
  std::string public_key; // raw
  std::string name;
};

struct TrustStore {
  std::string path;    // trusted_keys
  std::string own_key; // this user's public key, always trusted
  std::vector<TrustedKey> keys;
  bool trusts(std::string_view public_key) const;
};

// The keys of a trusted_keys file's text; an error names `source` and the
// line.
Expected<std::vector<TrustedKey>> parseTrustedKeys(std::string_view text,
                                                   const std::string &source);

// This user's own key (created on first use) and the trusted_keys file.
Expected<TrustStore> loadTrustStore();
// Adds `public_key` to the trusted_keys file (kept if already there).
Status trustKey(std::string_view public_key, const std::string &name);

} // namespace kiln::artifact
