// Kernel-cache settings: parsing the mode and sizes, resolving the directory.
#include "compiler/cache/cache_config.h"

#include "support/byte_size.h"

#include <cstdlib>

namespace kiln::cache {

Expected<CacheMode> parseCacheMode(std::string_view text) {
  if (text == "enable")
    return CacheMode::Enable;
  if (text == "disable")
    return CacheMode::Disable;
  if (text == "force")
    return CacheMode::Force;
  return Error("unknown cache mode '" + std::string(text) +
               "' (expected enable, disable or force)");
}

std::string_view cacheModeName(CacheMode mode) {
  switch (mode) {
  case CacheMode::Enable:
    return "enable";
  case CacheMode::Disable:
    return "disable";
  case CacheMode::Force:
    return "force";
  }
  return "?";
}

Expected<std::string> resolveCacheDir(const std::optional<std::string> &flag) {
  if (flag) {
    if (flag->empty())
      return Error("--cache-dir: empty path");
    return *flag;
  }
  auto env = [](const char *name) -> std::string {
    const char *v = std::getenv(name);
    return v ? v : "";
  };
  if (std::string d = env("KILN_CACHE_DIR"); !d.empty())
    return d;
  // The XDG spec says a relative XDG_CACHE_HOME is invalid and to be ignored.
  if (std::string d = env("XDG_CACHE_HOME"); !d.empty() && d[0] == '/')
    return d + "/kiln";
  if (std::string home = env("HOME"); !home.empty())
    return home + "/.cache/kiln";
  return Error("no cache directory: set --cache-dir, KILN_CACHE_DIR or HOME");
}

Expected<uint64_t> parseSize(std::string_view text) { return parseByteSize(text); }

Expected<uint64_t> maxSizeFromEnv() {
  const char *v = std::getenv("KILN_CACHE_MAX_SIZE");
  if (!v || !*v)
    return kDefaultMaxBytes;
  auto size = parseSize(v);
  if (!size)
    return size.error().withContext("KILN_CACHE_MAX_SIZE");
  return size;
}

} // namespace kiln::cache
