// Sizes in bytes as people write and read them: "2GiB", "500M", "1.5 GiB".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "support/error.h"

namespace kiln {

// "12 B", "3.5 KiB", "1.2 GiB" (powers of 1024, one decimal).
std::string formatBytes(int64_t bytes);

// A whole number of bytes with an optional unit, powers of 1024: K, M, G, T,
// each also as KiB/KB, any case ("500M", "2GiB", "64g", "1048576").
Expected<uint64_t> parseByteSize(std::string_view text);

} // namespace kiln
