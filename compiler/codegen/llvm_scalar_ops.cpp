// See llvm_scalar_ops.h.
#include "compiler/codegen/llvm_scalar_ops.h"

#include <llvm/IR/Intrinsics.h>

#include "compiler/codegen/llvm_storage.h"

namespace kiln::codegen {

using llvm::Value;

Value *emitUnary(llvm::IRBuilder<> &b, UnaryOp op, Value *x, bool f) {
  switch (op) {
  case UnaryOp::Neg:
    return f ? b.CreateFNeg(x) : b.CreateSub(b.getInt64(0), x);
  case UnaryOp::Exp: {
    // exp(x) rounds to 0 in f32 for x < -104 (below 2^-150). Those lanes
    // take 0 directly and hand exp a harmless 0: libmvec sends a whole
    // vector holding one underflowing argument (a masked score, the
    // lowest finite float minus the row max) to a scalar fallback. NaN
    // compares false and goes through exp.
    Value *underflows = b.CreateFCmpOLT(x, f32Constant(b, -104.0f));
    Value *e =
        intrinsic(b, llvm::Intrinsic::exp, {b.CreateSelect(underflows, f32Constant(b, 0), x)});
    return b.CreateSelect(underflows, f32Constant(b, 0), e);
  }
  case UnaryOp::Log:
    return intrinsic(b, llvm::Intrinsic::log, {x});
  case UnaryOp::Sqrt:
    return intrinsic(b, llvm::Intrinsic::sqrt, {x});
  case UnaryOp::Cos:
    return intrinsic(b, llvm::Intrinsic::cos, {x});
  case UnaryOp::Sin:
    return intrinsic(b, llvm::Intrinsic::sin, {x});
  case UnaryOp::Abs:
    return f ? intrinsic(b, llvm::Intrinsic::fabs, {x})
             : b.CreateIntrinsic(llvm::Intrinsic::abs, {x->getType()}, {x, b.getFalse()});
  case UnaryOp::Not:
    return b.CreateNot(x);
  }
  return nullptr;
}

Value *emitBinary(llvm::IRBuilder<> &b, BinaryOp op, Value *a, Value *c, bool f) {
  switch (op) {
  case BinaryOp::Add:
    return f ? b.CreateFAdd(a, c) : b.CreateAdd(a, c);
  case BinaryOp::Sub:
    return f ? b.CreateFSub(a, c) : b.CreateSub(a, c);
  case BinaryOp::Mul:
    return f ? b.CreateFMul(a, c) : b.CreateMul(a, c);
  case BinaryOp::Div:
    return f ? b.CreateFDiv(a, c) : b.CreateSDiv(a, c);
  case BinaryOp::Max:
    return f ? intrinsic(b, llvm::Intrinsic::maxnum, {a, c})
             : intrinsic(b, llvm::Intrinsic::smax, {a, c});
  case BinaryOp::Min:
    return f ? intrinsic(b, llvm::Intrinsic::minnum, {a, c})
             : intrinsic(b, llvm::Intrinsic::smin, {a, c});
  case BinaryOp::Pow:
    return intrinsic(b, llvm::Intrinsic::pow, {a, c});
  case BinaryOp::Rem:
    return b.CreateSRem(a, c);
  case BinaryOp::And:
    return b.CreateAnd(a, c);
  case BinaryOp::Or:
    return b.CreateOr(a, c);
  case BinaryOp::Lt:
    return f ? b.CreateFCmpOLT(a, c) : b.CreateICmpSLT(a, c);
  case BinaryOp::Le:
    return f ? b.CreateFCmpOLE(a, c) : b.CreateICmpSLE(a, c);
  case BinaryOp::Eq:
    return f ? b.CreateFCmpOEQ(a, c) : b.CreateICmpEQ(a, c);
  case BinaryOp::Ne:
    return f ? b.CreateFCmpUNE(a, c) : b.CreateICmpNE(a, c);
  case BinaryOp::Gt:
    return f ? b.CreateFCmpOGT(a, c) : b.CreateICmpSGT(a, c);
  case BinaryOp::Ge:
    return f ? b.CreateFCmpOGE(a, c) : b.CreateICmpSGE(a, c);
  }
  return nullptr;
}

Value *emitConvert(llvm::IRBuilder<> &b, Value *x, ScalarType from, ScalarType to) {
  if (from == to)
    return x;
  if (to == ScalarType::Bool)
    return from == ScalarType::F32 ? b.CreateFCmpUNE(x, f32Constant(b, 0))
                                   : b.CreateICmpNE(x, b.getInt64(0));
  if (to == ScalarType::F32)
    return from == ScalarType::Bool ? b.CreateUIToFP(x, b.getFloatTy())
                                    : b.CreateSIToFP(x, b.getFloatTy());
  // to i64
  if (from == ScalarType::Bool)
    return b.CreateZExt(x, b.getInt64Ty());
  return b.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {b.getInt64Ty(), b.getFloatTy()}, {x});
}

} // namespace kiln::codegen
