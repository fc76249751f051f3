// Kernel-cache settings from flags and the environment: mode, directory, size cap.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "support/error.h"

namespace kiln::cache {

// CANN's op_compiler_cache_mode: disable never reads or writes; force ignores
// entries and recompiles, overwriting them.
enum class CacheMode { Enable, Disable, Force };
Expected<CacheMode> parseCacheMode(std::string_view text);
std::string_view cacheModeName(CacheMode mode);

inline constexpr uint64_t kDefaultMaxBytes = 500ull * 1024 * 1024;

// `--cache-dir` (when given) > KILN_CACHE_DIR > $XDG_CACHE_HOME/kiln > ~/.cache/kiln.
Expected<std::string> resolveCacheDir(const std::optional<std::string> &flag);
// KILN_CACHE_MAX_SIZE: bytes, with an optional K, M or G suffix (powers of 1024);
// unset means kDefaultMaxBytes.
Expected<uint64_t> maxSizeFromEnv();
Expected<uint64_t> parseSize(std::string_view text);

} // namespace kiln::cache
