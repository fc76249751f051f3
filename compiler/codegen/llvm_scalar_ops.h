// One scalar operation of a kernel expression (kernel_expr.h) as LLVM IR,
// on f32 (`f`) or i64 and bool operands: what the emitter's loops apply
// element by element, vectorised by LLVM afterwards.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include "compiler/codegen/kernel_expr.h"

namespace kiln::codegen {

llvm::Value *emitUnary(llvm::IRBuilder<> &b, UnaryOp op, llvm::Value *x, bool f);
llvm::Value *emitBinary(llvm::IRBuilder<> &b, BinaryOp op, llvm::Value *a, llvm::Value *c, bool f);
// `x` of type `from` as `to`: f32 to i64 saturates, bool is x != 0.
llvm::Value *emitConvert(llvm::IRBuilder<> &b, llvm::Value *x, ScalarType from, ScalarType to);
// A reduction's start value and one step of it (acc with the next summand
// `v`), on f32 (`f`) or i64.
llvm::Value *reductionIdentity(llvm::IRBuilder<> &b, ReduceOp op, bool f);
llvm::Value *combineReduction(llvm::IRBuilder<> &b, ReduceOp op, bool f, llvm::Value *acc,
                              llvm::Value *v);

} // namespace kiln::codegen
