#include "compiler/artifact/artifact_signing.h"

#include <filesystem>
#include <sstream>

#include <sys/stat.h>

#include <openssl/evp.h>
#include <openssl/pem.h>

#include "compiler/cache/key_files.h"
#include "compiler/cache/sha256.h"
#include "support/file_io.h"

namespace kiln::artifact {

struct SigningKey::Impl {
  EVP_PKEY *key = nullptr;
  ~Impl() { EVP_PKEY_free(key); }
};

namespace {

Expected<std::string> rawPublicKey(EVP_PKEY *key) {
  std::string out(kPublicKeySize, '\0');
  size_t size = out.size();
  if (EVP_PKEY_get_raw_public_key(key, reinterpret_cast<unsigned char *>(out.data()), &size) != 1 ||
      size != kPublicKeySize)
    return Error("OpenSSL could not read the Ed25519 public key");
  return out;
}

} // namespace

SigningKey::SigningKey(std::unique_ptr<Impl> impl, std::string public_key, std::string path)
    : impl_(std::move(impl)), public_key_(std::move(public_key)), path_(std::move(path)) {}
SigningKey::SigningKey(SigningKey &&) noexcept = default;
SigningKey &SigningKey::operator=(SigningKey &&) noexcept = default;
SigningKey::~SigningKey() = default;

Expected<SigningKey> SigningKey::generate() {
  auto impl = std::make_unique<Impl>();
  EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr);
  const bool ok = ctx && EVP_PKEY_keygen_init(ctx) == 1 && EVP_PKEY_keygen(ctx, &impl->key) == 1;
  EVP_PKEY_CTX_free(ctx);
  if (!ok)
    return Error("OpenSSL could not generate an Ed25519 key");
  KILN_ASSIGN_OR_RETURN(std::string public_key, rawPublicKey(impl->key));
  return SigningKey(std::move(impl), std::move(public_key), "");
}

Expected<SigningKey> SigningKey::fromPem(std::string_view pem, const std::string &source) {
  BIO *bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  auto impl = std::make_unique<Impl>();
  impl->key = bio ? PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr) : nullptr;
  BIO_free(bio);
  if (!impl->key || EVP_PKEY_get_id(impl->key) != EVP_PKEY_ED25519)
    return Error(source + ": not an Ed25519 private key in PEM");
  KILN_ASSIGN_OR_RETURN(std::string public_key, rawPublicKey(impl->key));
  return SigningKey(std::move(impl), std::move(public_key), source);
}

Expected<std::string> SigningKey::toPem() const {
  BIO *bio = BIO_new(BIO_s_mem());
  if (!bio ||
      PEM_write_bio_PrivateKey(bio, impl_->key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    BIO_free(bio);
    return Error("OpenSSL could not write the signing key");
  }
  char *data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<size_t>(size));
  BIO_free(bio);
  return pem;
}

Expected<SigningKey> SigningKey::loadOrCreate() {
  KILN_ASSIGN_OR_RETURN(std::string dir, cache::kilnConfigDir());
  const std::string path = (std::filesystem::path(dir) / "signing.key").string();
  KILN_ASSIGN_OR_RETURN(std::string pem,
                        cache::readOrCreateKeyFile(path, 16384, []() -> Expected<std::string> {
                          KILN_ASSIGN_OR_RETURN(SigningKey fresh, generate());
                          return fresh.toPem();
                        }));
  return fromPem(pem, path);
}

Expected<std::string> SigningKey::sign(std::string_view data) const {
  std::string signature(kSignatureSize, '\0');
  size_t size = signature.size();
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  const bool ok =
      ctx && EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, impl_->key) == 1 &&
      EVP_DigestSign(ctx, reinterpret_cast<unsigned char *>(signature.data()), &size,
                     reinterpret_cast<const unsigned char *>(data.data()), data.size()) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok || size != kSignatureSize)
    return Error("OpenSSL could not sign with the Ed25519 key");
  return signature;
}

bool verifySignature(std::string_view public_key, std::string_view data,
                     std::string_view signature) {
  if (public_key.size() != kPublicKeySize || signature.size() != kSignatureSize)
    return false;
  EVP_PKEY *key = EVP_PKEY_new_raw_public_key(
      EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char *>(public_key.data()),
      public_key.size());
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  const bool ok =
      key && ctx && EVP_DigestVerifyInit(ctx, nullptr, nullptr, nullptr, key) == 1 &&
      EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char *>(signature.data()),
                       signature.size(), reinterpret_cast<const unsigned char *>(data.data()),
                       data.size()) == 1;
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(key);
  return ok;
}

std::string publicKeyHex(std::string_view public_key) {
  static const char *kHex = "0123456789abcdef";
  std::string s;
  for (unsigned char b : public_key) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

Expected<std::string> parsePublicKeyHex(std::string_view hex) {
  if (hex.size() != 2 * kPublicKeySize)
    return Error("a public key is 64 hex digits, got " + std::to_string(hex.size()) +
                 " characters");
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    auto digit = [](char c) -> int {
      if (c >= '0' && c <= '9')
        return c - '0';
      if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
      if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
      return -1;
    };
    const int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0)
      return Error("a public key is 64 hex digits; character " + std::to_string(i + 1) +
                   " is not one");
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

std::string keyFingerprint(std::string_view public_key) {
  return cache::sha256Hex(public_key).substr(0, 16);
}

bool TrustStore::trusts(std::string_view public_key) const {
  if (public_key == own_key)
    return true;
  for (const TrustedKey &k : keys)
    if (k.public_key == public_key)
      return true;
  return false;
}

namespace {

Expected<std::string> trustedKeysPath() {
  KILN_ASSIGN_OR_RETURN(std::string dir, cache::kilnConfigDir());
  return (std::filesystem::path(dir) / "trusted_keys").string();
}

Expected<std::vector<TrustedKey>> readTrustedKeys(const std::string &path) {
  if (!std::filesystem::exists(path))
    return std::vector<TrustedKey>{};
  // The file decides what code runs: the same checks as a key file.
  KILN_ASSIGN_OR_RETURN(std::string text, cache::readOrCreateKeyFile(path, 1 << 20, nullptr));
  return parseTrustedKeys(text, path);
}

} // namespace

Expected<std::vector<TrustedKey>> parseTrustedKeys(std::string_view text,
                                                   const std::string &source) {
  std::vector<TrustedKey> keys;
  std::istringstream in{std::string(text)};
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (const size_t hash = line.find('#'); hash != std::string::npos)
      line.resize(hash);
    std::istringstream words(line);
    std::string hex, name;
    if (!(words >> hex))
      continue;
    std::getline(words >> std::ws, name);
    auto key = parsePublicKeyHex(hex);
    if (!key)
      return Error(source + ": line " + std::to_string(number) + ": " + key.message());
    keys.push_back({*key, name});
  }
  return keys;
}

Expected<TrustStore> loadTrustStore() {
  TrustStore store;
  KILN_ASSIGN_OR_RETURN(store.path, trustedKeysPath());
  KILN_ASSIGN_OR_RETURN(SigningKey own, SigningKey::loadOrCreate());
  store.own_key = own.publicKey();
  KILN_ASSIGN_OR_RETURN(store.keys, readTrustedKeys(store.path));
  return store;
}

Status trustKey(std::string_view public_key, const std::string &name) {
  KILN_ASSIGN_OR_RETURN(std::string path, trustedKeysPath());
  KILN_ASSIGN_OR_RETURN(std::vector<TrustedKey> keys, readTrustedKeys(path));
  std::string text;
  for (const TrustedKey &k : keys) {
    if (k.public_key == public_key)
      return Status::ok();
    text += publicKeyHex(k.public_key) + (k.name.empty() ? "" : " " + k.name) + "\n";
  }
  std::string clean_name;
  for (char c : name)
    if (static_cast<unsigned char>(c) >= 0x20 && c != '#')
      clean_name += c;
  text += publicKeyHex(public_key) + (clean_name.empty() ? "" : " " + clean_name) + "\n";
  KILN_RETURN_IF_ERROR(writeFileAtomic(path, text));
  ::chmod(path.c_str(), 0600);
  return Status::ok();
}

} // namespace kiln::artifact
