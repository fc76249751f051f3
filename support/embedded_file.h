// A data file of the source tree (op definitions, target descriptions, fusion
// rules) embedded in the binary at build time by cmake/embed_files.cmake, so
// that kiln runs the same from any directory.
#pragma once

#include <string_view>

namespace kiln {

struct EmbeddedFile {
  std::string_view path; // relative to the repository root
  std::string_view contents;
};

} // namespace kiln
