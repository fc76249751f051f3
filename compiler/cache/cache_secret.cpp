#include "compiler/cache/cache_secret.h"

#include <cstdlib>
#include <filesystem>

#include "compiler/cache/key_files.h"

namespace kiln::cache {

Expected<CacheSecret> loadCacheSecret() {
  CacheSecret secret;
  if (const char *file = std::getenv("KILN_CACHE_KEY_FILE"); file && *file) {
    secret.path = file;
  } else {
    KILN_ASSIGN_OR_RETURN(std::string dir, kilnConfigDir());
    secret.path = (std::filesystem::path(dir) / "cache.key").string();
  }
  KILN_ASSIGN_OR_RETURN(secret.key,
                        readOrCreateKeyFile(secret.path, 4096, [] { return randomBytes(32); }));
  if (secret.key.size() < 16)
    return Error(secret.path + ": a cache key needs at least 16 bytes, the file has " +
                 std::to_string(secret.key.size()));
  return secret;
}

} // namespace kiln::cache
