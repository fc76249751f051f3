// Encoding and checking kernel-cache entries (format in cache_entry.h).
#include "compiler/cache/cache_entry.h"

#include <cstring>

#include <openssl/crypto.h>

#include "compiler/cache/sha256.h"
#include "support/file_io.h"
#include "support/little_endian.h"

namespace kiln::cache {
namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'K', 'C', 'E', '\0'};

struct Header {
  uint64_t meta_size = 0;
  uint64_t object_size = 0;
};

Expected<Header> parseHeader(std::string_view bytes, uint64_t file_size) {
  if (file_size < kEntryHeaderSize + kEntryChecksumSize || bytes.size() < kEntryHeaderSize)
    return Error("truncated: " + std::to_string(file_size) + " bytes is shorter than any entry");
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    return Error("bad magic: not a kiln kernel-cache entry");
  uint32_t version = uint32_t(getLE(bytes, 8, 4));
  if (version != kEntryFormatVersion)
    return Error("unknown entry format version " + std::to_string(version) + " (this kiln reads " +
                 std::to_string(kEntryFormatVersion) + ")");
  Header h{getLE(bytes, 16, 8), getLE(bytes, 24, 8)};
  const uint64_t room = file_size - kEntryHeaderSize - kEntryChecksumSize;
  if (h.meta_size > room || h.object_size > room - h.meta_size)
    return Error("truncated: header promises " + std::to_string(h.meta_size) + "+" +
                 std::to_string(h.object_size) + " bytes, file has room for " +
                 std::to_string(room));
  if (h.meta_size + h.object_size != room)
    return Error("trailing bytes: " + std::to_string(room - h.meta_size - h.object_size) +
                 " after the payload");
  return h;
}

Status parseMeta(std::string_view text, CacheEntry &entry) {
  auto parsed = parseJson(text, "metadata");
  if (!parsed)
    return Error("malformed " + parsed.message());
  const nlohmann::json &meta = *parsed;
  if (!meta.is_object() || !meta.contains("key") || !meta["key"].is_string() ||
      !meta.contains("kernel") || !meta["kernel"].is_string() || !meta.contains("parts") ||
      !meta["parts"].is_array())
    return Error("malformed metadata");
  entry.key = meta["key"].get<std::string>();
  entry.kernel_name = meta["kernel"].get<std::string>();
  for (const nlohmann::json &part : meta["parts"]) {
    if (!part.is_array() || part.size() != 2 || !part[0].is_string() || !part[1].is_string())
      return Error("malformed metadata: a key part is not [name, digest]");
    entry.parts.emplace_back(part[0].get<std::string>(), part[1].get<std::string>());
  }
  if (meta.contains("metadata"))
    entry.metadata = meta["metadata"];
  if (meta.contains("created") && meta["created"].is_number_integer())
    entry.created = meta["created"].get<int64_t>();
  if (meta.contains("entry")) {
    if (meta["entry"] != "program")
      return Error("malformed metadata: unknown entry kind " + meta["entry"].dump());
    entry.kind = EntryKind::Program;
  }
  return Status::ok();
}

} // namespace

std::string encodeEntry(const CacheEntry &entry, std::string_view secret) {
  // An array keeps the parts in key order (a JSON object would sort them).
  nlohmann::json parts = nlohmann::json::array();
  for (const auto &[name, hex] : entry.parts)
    parts.push_back({name, hex});
  nlohmann::json meta = {{"key", entry.key},
                         {"kernel", entry.kernel_name},
                         {"parts", parts},
                         {"metadata", entry.metadata},
                         {"created", entry.created}};
  if (entry.kind == EntryKind::Program)
    meta["entry"] = "program";
  const std::string meta_text = meta.dump();
  std::string out(kMagic, sizeof(kMagic));
  putLE(out, kEntryFormatVersion, 4);
  putLE(out, 0, 4);
  putLE(out, meta_text.size(), 8);
  putLE(out, entry.object.size(), 8);
  out += meta_text;
  out += entry.object;
  const Sha256::Digest mac = hmacSha256(secret, out);
  out.append(reinterpret_cast<const char *>(mac.data()), mac.size());
  return out;
}

Expected<CacheEntry> decodeEntry(std::string_view bytes, std::string_view secret) {
  KILN_ASSIGN_OR_RETURN(Header h, parseHeader(bytes, bytes.size()));
  const size_t body = bytes.size() - kEntryChecksumSize;
  const Sha256::Digest mac = hmacSha256(secret, bytes.substr(0, body));
  if (CRYPTO_memcmp(mac.data(), bytes.data() + body, kEntryChecksumSize) != 0)
    return Error("authentication failed: the HMAC does not verify under this user's cache key "
                 "(written by someone else, or corrupt)");
  CacheEntry entry;
  KILN_RETURN_IF_ERROR(parseMeta(bytes.substr(kEntryHeaderSize, h.meta_size), entry));
  entry.object = std::string(bytes.substr(kEntryHeaderSize + h.meta_size, h.object_size));
  return entry;
}

Expected<CacheEntry> decodeEntryMeta(std::string_view prefix, uint64_t file_size) {
  KILN_ASSIGN_OR_RETURN(Header h, parseHeader(prefix, file_size));
  if (prefix.size() < kEntryHeaderSize + h.meta_size)
    return Error("truncated metadata");
  CacheEntry entry;
  KILN_RETURN_IF_ERROR(parseMeta(prefix.substr(kEntryHeaderSize, h.meta_size), entry));
  return entry;
}

} // namespace kiln::cache
