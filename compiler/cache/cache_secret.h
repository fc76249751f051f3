// The secret that authenticates kernel-cache entries. Entries are native
// code: a checksum anyone can recompute would let whoever can write the
// cache folder run their code in the next compile, so every entry ends in an
// HMAC-SHA-256 under a key kept outside the cache. An entry that fails it is
// never loaded; it is evicted and compiled again.
//
// The key is KILN_CACHE_KEY_FILE when set (a team sharing a cache shares
// that file), else cache.key in kiln's key folder (key_files.h), 32 random
// bytes created 0600 on first use.
#pragma once

#include <string>

#include "support/error.h"

namespace kiln::cache {

struct CacheSecret {
  std::string key;
  std::string path; // where it was read from, for messages
};

Expected<CacheSecret> loadCacheSecret();

} // namespace kiln::cache
