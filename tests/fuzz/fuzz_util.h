// Helpers shared by the libFuzzer targets of tests/fuzz: the input as text,
// and the properties every reader promises on bad input (an error that names
// the file, never a crash).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "support/error.h"

namespace kiln::fuzz {

inline std::string_view asText(const uint8_t *data, size_t size) {
  return {reinterpret_cast<const char *>(data), size};
}

// Stops the run (a crash for libFuzzer) when `ok` is false.
inline void require(bool ok, std::string_view what, std::string_view message = {}) {
  if (ok)
    return;
  std::fprintf(stderr, "fuzz property violated: %.*s\n%.*s\n", int(what.size()), what.data(),
               int(message.size()), message.data());
  std::abort();
}

// A reader's error must name the file it read (DESIGN.md: every user-facing
// error names the file).
template <typename T> void requireNamesSource(const T &result, std::string_view source) {
  if (!result)
    require(result.message().find(source) != std::string::npos, "the error does not name the file",
            result.message());
}

} // namespace kiln::fuzz
