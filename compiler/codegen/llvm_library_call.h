// A kernel that is a call of its library routine (kernels/library_kernels.h):
// the kernel function's body forwards its buffers and rows, with the
// lowering's arguments and the overflow mode as a constant array.
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include "compiler/codegen/kernel_program.h"
#include "ir/dtype.h"

namespace kiln::codegen {

void emitLibraryCall(llvm::IRBuilder<> &b, llvm::Module &module, llvm::Function *fn,
                     const KernelProgram &program, OverflowMode overflow);

} // namespace kiln::codegen
