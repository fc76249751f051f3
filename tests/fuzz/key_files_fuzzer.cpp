// Fuzzes what decides which native code kiln trusts: the trusted_keys
// reader, the PEM reader of the signing key (OpenSSL) and signature
// verification on arbitrary keys, messages and signatures. Errors name
// their source; an accepted key list round-trips through its hex form; a
// signature verifies only where it was made.
#include "compiler/artifact/artifact_signing.h"
#include "tests/fuzz/checksum_fixup.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace kiln;
  const std::string_view text = fuzz::asText(data, size);
  const std::string source = "fuzz/trusted_keys";
  auto keys = artifact::parseTrustedKeys(text, source);
  fuzz::requireNamesSource(keys, source);
  if (keys) {
    for (const artifact::TrustedKey &k : *keys) {
      auto again = artifact::parsePublicKeyHex(artifact::publicKeyHex(k.public_key));
      fuzz::require(again.isOk() && *again == k.public_key, "a trusted key does not round-trip",
                    "");
    }
  }

  (void)artifact::SigningKey::fromPem(text, "fuzz/signing.key");

  // The input split as key | signature | message.
  if (size >= artifact::kPublicKeySize + artifact::kSignatureSize) {
    const std::string_view key = text.substr(0, artifact::kPublicKeySize);
    const std::string_view signature =
        text.substr(artifact::kPublicKeySize, artifact::kSignatureSize);
    const std::string_view message =
        text.substr(artifact::kPublicKeySize + artifact::kSignatureSize);
    (void)artifact::verifySignature(key, message, signature);
    const std::string made = *fuzz::signingKey().sign(message);
    fuzz::require(artifact::verifySignature(fuzz::signingKey().publicKey(), message, made),
                  "a signature does not verify where it was made", "");
    fuzz::require(made == signature || !artifact::verifySignature(fuzz::signingKey().publicKey(),
                                                                  message, signature),
                  "a forged signature verifies", "");
  }
  return 0;
}
