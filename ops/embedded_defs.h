// The op definition files of ops/defs/, embedded in the binary at build time.
#pragma once

#include <vector>

#include "support/embedded_file.h"

namespace kiln::ops {

const std::vector<EmbeddedFile> &embeddedOpDefFiles();

} // namespace kiln::ops
