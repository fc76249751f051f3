// Lowering a kernel program to LLVM IR.
//
// Every kernel is one function with the C signature
//
//   void kernel(void **buffers, void *scratch, int64_t row_begin, int64_t row_end,
//               uint32_t *status);
//
// `buffers` holds the program's inputs, then its stored outputs, in order;
// `scratch` holds 8 bytes per element of one row of the materialised stages
// (KernelProgram::scratchElementsPerRow); rows [row_begin, row_end) are
// computed. Loops over a row's elements are plain counted loops over
// constant extents, which LLVM's loop vectoriser turns into SIMD code for
// the host. Storage dtypes are converted at loads and stores; f16 and bf16
// rounding follows the kernel's overflow mode bit for bit as ir/float16.cpp.
// Where that rounding overflows (ir/float_status.h: saturation clamps, NaN to
// 0, inf or NaN results) the call ors kFloatStatusOverflow into `*status`
// once, atomically, so the tiles of one kernel may share a status word.
#pragma once

#include <string>

#include "compiler/codegen/kernel_program.h"
#include "ir/error.h"

namespace llvm {
class Module;
}

namespace kiln::codegen {

inline constexpr int64_t kScratchSlotBytes = 8;

Status emitKernel(const KernelProgram &program, const std::string &function_name,
                  OverflowMode overflow, llvm::Module &module);

} // namespace kiln::codegen
