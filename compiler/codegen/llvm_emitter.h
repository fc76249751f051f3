// Lowering a kernel program to LLVM IR: one function per kernel with the
// calling convention of kernels/kernel_abi.h. Loops over a row's elements are
// plain counted loops over constant extents, which LLVM's loop vectoriser
// turns into SIMD code for the host. Storage dtypes are converted at loads
// and stores; f16 and bf16 rounding follows the kernel's overflow mode bit
// for bit as ir/float16.cpp, and raises the status word where kernel_abi.h
// says.
#pragma once

#include <string>

#include "compiler/codegen/kernel_program.h"
#include "kernels/kernel_abi.h"
#include "support/error.h"

namespace llvm {
class Module;
}

namespace kiln::codegen {

using kernels::kScratchSlotBytes;

Status emitKernel(const KernelProgram &program, const std::string &function_name,
                  OverflowMode overflow, llvm::Module &module);

} // namespace kiln::codegen
