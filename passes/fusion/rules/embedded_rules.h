// The rule files of fusion_rules/ (and its default switch file), embedded in
// the binary at build time.
#pragma once

#include <vector>

#include "support/embedded_file.h"

namespace kiln::passes {

const std::vector<EmbeddedFile> &embeddedFusionRuleFiles();

} // namespace kiln::passes
