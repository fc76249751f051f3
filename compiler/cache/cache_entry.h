// One kernel-cache entry on disk: an object file plus metadata, with a trailing checksum.
//
// Entry format (all integers little-endian):
//
//   entry    := header meta object checksum
//   header   := magic[8] = "KILNKCE\0"  version:u32  reserved:u32 = 0
//               meta_size:u64  object_size:u64                      (32 bytes)
//   meta     := meta_size bytes of JSON:
//               {"key": hex, "kernel": name, "parts": [[part, hex], ...], "metadata": {...},
//                "created": unix seconds}
//   object   := object_size bytes (the kernel's object file)
//   checksum := SHA-256 of header, meta and object                  (32 bytes)
//
// Format versions:
//   1 (2026-12-02): first version.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "compiler/cache/cache_key.h"
#include "ir/error.h"

namespace kiln::cache {

inline constexpr uint32_t kEntryFormatVersion = 1;
inline constexpr size_t kEntryHeaderSize = 32;
inline constexpr size_t kEntryChecksumSize = 32;

struct CacheEntry {
  std::string key;         // hex
  std::string kernel_name; // of the kernel that stored it
  std::vector<std::pair<std::string, std::string>> parts;
  nlohmann::json metadata = nlohmann::json::object();
  int64_t created = 0;
  std::string object;
};

std::string encodeEntry(const CacheEntry &entry);

// Rejects bad magic, unknown versions, truncation, trailing bytes, a bad
// checksum and malformed metadata, each with its own message.
Expected<CacheEntry> decodeEntry(std::string_view bytes);

// Reads only header and meta (no checksum check): for listings and explanations,
// never for loading code. `object` stays empty.
Expected<CacheEntry> decodeEntryMeta(std::string_view prefix, uint64_t file_size);

} // namespace kiln::cache
