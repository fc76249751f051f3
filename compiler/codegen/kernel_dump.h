// The IR dump of a kernel that could not be built, so a diagnostic can point
// at what the compiler saw (as CANN leaves a failing operator's files in
// kernel_meta/): the member ops as kiln IR, the kernel program, and the
// canonical text its cache key hashes.
#pragma once

#include <string>
#include <vector>

#include "compiler/codegen/kernel_builder.h"
#include "compiler/codegen/kernel_diagnostic.h"
#include "compiler/codegen/kernel_spec.h"

namespace kiln::codegen {

// Writes the dump of `kernel` into `dir` (created when missing) and returns
// its path. `build` is null when the kernel's program could not be built.
// The file name is the kernel's name plus a hash of its canonical text, so
// identical kernels share one file and rewriting it is harmless.
Expected<std::string> writeKernelDump(const std::string &dir, const Graph &graph,
                                      const KernelSpec &kernel, const KernelBuild *build,
                                      const std::vector<KernelDiagnostic> &problems);

} // namespace kiln::codegen
