// The op definition files of ops/defs/, embedded in the binary at build time
// (the generated embedded_defs.cpp).
#pragma once

#include <string_view>
#include <vector>

namespace kiln::ops {

struct EmbeddedFile {
  std::string_view path; // relative to the repository root
  std::string_view contents;
};

const std::vector<EmbeddedFile> &embeddedOpDefFiles();

} // namespace kiln::ops
