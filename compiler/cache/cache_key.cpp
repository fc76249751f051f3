// Hashing the key parts: the key hashes each part's fixed-length digest, so parts cannot run
// together.
#include "compiler/cache/cache_key.h"

#include "compiler/cache/sha256.h"

namespace kiln::cache {

CacheKey hashKeyParts(std::string_view domain, const std::vector<std::string_view> &names,
                      const std::vector<const std::string *> &values) {
  CacheKey key;
  Sha256 whole;
  whole.update(std::string(domain) + "\n");
  for (size_t i = 0; i < values.size(); ++i) {
    std::string part_hex = sha256Hex(*values[i]);
    whole.update(names[i]);
    whole.update("=");
    whole.update(part_hex);
    whole.update("\n");
    key.parts.emplace_back(std::string(names[i]), std::move(part_hex));
  }
  key.hex = toHex(whole.finish());
  return key;
}

CacheKey makeCacheKey(const CacheKeyInputs &in) {
  CacheKey key =
      hashKeyParts("kiln-kernel-cache-key/1", {kKeyPartNames.begin(), kKeyPartNames.end()},
                   {&in.kernel_ir, &in.target, &in.host_features, &in.kiln_version,
                    &in.kiln_source_hash, &in.llvm_version, &in.codegen_options});
  key.kernel_name = in.kernel_name;
  return key;
}

std::string_view entryKindName(EntryKind kind) {
  return kind == EntryKind::Program ? "program" : "kernel";
}

bool isKeyHex(std::string_view text) {
  if (text.size() != 64)
    return false;
  for (char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return false;
  return true;
}

} // namespace kiln::cache
