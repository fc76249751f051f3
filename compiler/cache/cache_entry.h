// One cache entry on disk: a kernel's object file, or a whole compiled
// program (compiler/driver/program_payload.h), plus metadata, with a trailing
// HMAC that authenticates it (cache_secret.h).
//
// Entry format (all integers little-endian):
//
//   entry    := header meta object checksum
//   header   := magic[8] = "KILNKCE\0"  version:u32  reserved:u32 = 0
//               meta_size:u64  object_size:u64                      (32 bytes)
//   meta     := meta_size bytes of JSON:
//               {"key": hex, "kernel": name, "parts": [[part, hex], ...], "metadata": {...},
//                "created": unix seconds, "entry": "program" (program entries only)}
//   object   := object_size bytes (the kernel's object file, or the program's payload)
//   mac      := HMAC-SHA-256 of header, meta and object under the
//               user's cache secret                                 (32 bytes)
//
// Format versions:
//   1 (2026-12-02): first version; the trailer was a plain SHA-256.
//   2 (2026-12-03): the trailer is an HMAC-SHA-256 under the cache secret.
//     (2026-12-03): "entry": "program" marks a whole-program entry; without
//                   it an entry is a kernel's, so kernel entries are unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "compiler/cache/cache_key.h"
#include "support/error.h"

namespace kiln::cache {

inline constexpr uint32_t kEntryFormatVersion = 2;
inline constexpr size_t kEntryHeaderSize = 32;
inline constexpr size_t kEntryChecksumSize = 32;

struct CacheEntry {
  std::string key;         // hex
  std::string kernel_name; // of the kernel (or the program) that stored it
  std::vector<std::pair<std::string, std::string>> parts;
  nlohmann::json metadata = nlohmann::json::object();
  int64_t created = 0;
  std::string object; // a kernel's object file, or a program's payload
  EntryKind kind = EntryKind::Kernel;
};

// `secret` is the key of the HMAC (cache_secret.h).
std::string encodeEntry(const CacheEntry &entry, std::string_view secret);

// Rejects bad magic, unknown versions, truncation, trailing bytes, an HMAC
// that does not verify under `secret` and malformed metadata, each with its
// own message.
Expected<CacheEntry> decodeEntry(std::string_view bytes, std::string_view secret);

// Reads only header and meta (no HMAC check): for listings and explanations,
// never for loading code. `object` stays empty.
Expected<CacheEntry> decodeEntryMeta(std::string_view prefix, uint64_t file_size);

} // namespace kiln::cache
