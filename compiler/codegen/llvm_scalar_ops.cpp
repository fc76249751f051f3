// See llvm_scalar_ops.h.
#include "compiler/codegen/llvm_scalar_ops.h"

#include <cstdint>
#include <limits>

#include <llvm/IR/Intrinsics.h>

#include "compiler/codegen/llvm_storage.h"
#include "kernels/exp_polynomial.h"

namespace kiln::codegen {

using llvm::Value;

namespace {

// exp_polynomial.h's exp as scalar IR, inline: LLVM vectorises it with the
// loop (a libmvec call a vector spilt every live register around it and
// bounded SiLU's and the loss's kernels), and the scalar and vector forms
// give the same bits, those of the host routines' AVX-512 exp.
Value *emitExp(llvm::IRBuilder<> &b, Value *x) {
  namespace ep = kernels::exp_polynomial;
  auto fma = [&](Value *p, Value *q, Value *r) {
    return intrinsic(b, llvm::Intrinsic::fma, {p, q, r});
  };
  // Lanes that underflow compute on 0, so that n stays in range, and give 0.
  Value *underflows = b.CreateFCmpOLT(x, f32Constant(b, ep::kUnderflow));
  Value *y = b.CreateSelect(underflows, f32Constant(b, 0), x);
  // min(clamp, y) as vminps takes it: NaN compares false and stays NaN.
  Value *clamp = f32Constant(b, ep::kOverflowClamp);
  y = b.CreateSelect(b.CreateFCmpOGT(y, clamp), clamp, y);
  Value *n =
      intrinsic(b, llvm::Intrinsic::roundeven, {b.CreateFMul(y, f32Constant(b, ep::kLog2e))});
  Value *minus_n = b.CreateFNeg(n);
  Value *r = fma(minus_n, f32Constant(b, ep::kLn2High), y);
  r = fma(minus_n, f32Constant(b, ep::kLn2Low), r);
  Value *p = f32Constant(b, ep::kCoefficients[0]);
  for (int i = 1; i < 6; ++i)
    p = fma(p, r, f32Constant(b, ep::kCoefficients[i]));
  p = b.CreateFAdd(fma(p, b.CreateFMul(r, r), r), f32Constant(b, 1));
  // p 2^n with n in [-150, 128], as two normal halves: the first product is
  // exact and the second rounds once, as vscalefps does (a subnormal result
  // too). NaN's n converts as 0 (p is NaN): a plain conversion, which
  // vectorises (a saturating one is scalarised lane by lane).
  Value *whole = b.CreateSelect(b.CreateFCmpUNO(n, n), f32Constant(b, 0), n);
  Value *k = b.CreateFPToSI(whole, b.getInt32Ty());
  Value *k_low = b.CreateAShr(k, 1);
  auto pow2 = [&](Value *e) {
    return b.CreateBitCast(b.CreateShl(b.CreateAdd(e, b.getInt32(127)), 23), b.getFloatTy());
  };
  Value *e = b.CreateFMul(b.CreateFMul(p, pow2(k_low)), pow2(b.CreateSub(k, k_low)));
  return b.CreateSelect(underflows, f32Constant(b, 0), e);
}

} // namespace

Value *emitUnary(llvm::IRBuilder<> &b, UnaryOp op, Value *x, bool f) {
  switch (op) {
  case UnaryOp::Neg:
    return f ? b.CreateFNeg(x) : b.CreateSub(b.getInt64(0), x);
  case UnaryOp::Exp:
    return emitExp(b, x);
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

Value *reductionIdentity(llvm::IRBuilder<> &b, ReduceOp op, bool f) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  switch (op) {
  case ReduceOp::Sum:
    return f ? f32Constant(b, 0) : b.getInt64(0);
  case ReduceOp::Max:
    return f ? f32Constant(b, -kInf) : b.getInt64(INT64_MIN);
  case ReduceOp::Min:
    return f ? f32Constant(b, kInf) : b.getInt64(INT64_MAX);
  }
  return nullptr;
}

Value *combineReduction(llvm::IRBuilder<> &b, ReduceOp op, bool f, Value *acc, Value *v) {
  switch (op) {
  case ReduceOp::Sum: {
    if (!f)
      return b.CreateAdd(acc, v);
    // A sum may be reassociated: LLVM then keeps one partial sum per vector
    // lane (exact order differs from the reference's, within its tolerance)
    // and the summand's exp and log vectorise too.
    auto *sum = llvm::cast<llvm::Instruction>(b.CreateFAdd(acc, v));
    sum->setHasAllowReassoc(true);
    return sum;
  }
  // IEEE maximum and minimum: a NaN propagates, as in the reference, and
  // LLVM vectorises the reduction without no-NaN flags.
  case ReduceOp::Max:
    return f ? intrinsic(b, llvm::Intrinsic::maximum, {acc, v})
             : intrinsic(b, llvm::Intrinsic::smax, {acc, v});
  case ReduceOp::Min:
    return f ? intrinsic(b, llvm::Intrinsic::minimum, {acc, v})
             : intrinsic(b, llvm::Intrinsic::smin, {acc, v});
  }
  return v;
}

} // namespace kiln::codegen
