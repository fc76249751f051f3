// Fuzzes the kernel-cache entry reader (cache_entry.h), whole entries with
// the trailing HMAC made valid and the metadata-only prefix read of
// `kiln cache list`; an accepted entry round-trips.
#include "compiler/cache/cache_entry.h"
#include "tests/fuzz/checksum_fixup.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace kiln;
  const std::string_view raw = fuzz::asText(data, size);
  // The listing reads a prefix of at most 64 KiB of a file of any size.
  (void)cache::decodeEntryMeta(raw.substr(0, 65536), raw.size());
  (void)cache::decodeEntryMeta(raw, raw.size() + 4096);

  const std::string bytes = fuzz::withValidEntryMac(raw);
  auto entry = cache::decodeEntry(bytes, fuzz::kCacheSecret);
  if (!entry)
    return 0;
  auto again =
      cache::decodeEntry(cache::encodeEntry(*entry, fuzz::kCacheSecret), fuzz::kCacheSecret);
  fuzz::require(again.isOk(), "an entry written by encodeEntry is refused",
                again ? "" : again.message());
  fuzz::require(again->key == entry->key && again->parts == entry->parts &&
                    again->object == entry->object && again->metadata == entry->metadata,
                "the cache entry does not round-trip");
  return 0;
}
