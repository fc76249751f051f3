// Checking a kernel against the target before anything runs: the tiling the
// NPU would use must fit its buffers, and the kernel may ask nothing of a unit
// the chip lacks. This is where CANN says "TBE compile failed"; kiln says it
// at compile time, with a code and the numbers.
//
// The Unified Buffer model (passes/fusion/ub_budget.h) streams every kernel in
// tiles of vector_tile_elements, halved until the kernel fits (down to
// kMinVectorTileElements). A fused kernel that reduces rows and reads
// the result back (RMSNorm, softmax) also keeps, per row, its reduction
// results and the reduced f32 row of its source in UB, since its
// intermediates never go back to HBM; a single op streams its rows from HBM
// as many times as it needs. A matmul's output tile (cube tile multiples)
// must fit L0C double-buffered before FixPipe drains it.
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/codegen/kernel_builder.h"
#include "compiler/codegen/kernel_diagnostic.h"
#include "executable/executable.h"
#include "passes/fusion/fusion_group_util.h"
#include "target/target.h"

namespace kiln::codegen {

// The smallest vector tile a kernel is split into (256 bytes of f32).
inline constexpr int64_t kMinVectorTileElements = 64;

using executable::KernelTiling; // the tiling the checks find, kept with the kernel

// Diagnostics for every constraint `kernel` breaks on `target` (empty when it
// fits); `tiling` receives the numbers either way.
std::vector<KernelDiagnostic> checkKernel(const passes::FusionView &view, const KernelSpec &kernel,
                                          const KernelBuild &build, const target::Target &target,
                                          KernelTiling &tiling);

// The diagnostic skeleton of `kernel` (code and constraint left to the caller).
KernelDiagnostic describeKernel(const Graph &graph, const KernelSpec &kernel);

} // namespace kiln::codegen
