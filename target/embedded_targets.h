// The target descriptions of target/data/, embedded in the binary at build time.
#pragma once

#include <vector>

#include "support/embedded_file.h"

namespace kiln::target {

const std::vector<EmbeddedFile> &embeddedTargetFiles();

} // namespace kiln::target
