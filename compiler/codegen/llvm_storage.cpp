#include "compiler/codegen/llvm_storage.h"

#include <cfloat>
#include <limits>

#include "ir/float16.h"
#include "ir/float_status.h"

namespace kiln::codegen {

using llvm::Value;

Value *intrinsic(llvm::IRBuilder<> &b, llvm::Intrinsic::ID id, std::vector<Value *> args) {
  return b.CreateIntrinsic(id, {args[0]->getType()}, args);
}

Value *f32Constant(llvm::IRBuilder<> &b, double v) {
  return llvm::ConstantFP::get(b.getFloatTy(), v);
}

namespace {
// Bit patterns of |x| from which rounding overflows (NaNs lie above each):
constexpr uint32_t kInfBits = 0x7f800000;           // f32, and bf16 in INFNAN mode
constexpr uint32_t kBF16BeyondMaxBits = 0x7f7f0001; // past bf16's largest finite
constexpr uint32_t kHalfInfBits = 0x7c00;           // an f16 result's inf

} // namespace

// x with NaN -> +-0 and +-inf clamped to +-max: the saturation of ir/float16.cpp.
Value *KernelStorage::clamp(Value *x, float max) {
  Value *clamped = intrinsic(
      b_, llvm::Intrinsic::minnum,
      {intrinsic(b_, llvm::Intrinsic::maxnum, {x, f32Constant(b_, -max)}), f32Constant(b_, max)});
  return b_.CreateSelect(b_.CreateFCmpUNO(x, x), f32Constant(b_, 0), clamped);
}

// Raises the call's overflow status where |x| >= the float whose bits are
// `threshold`: `x` is a float (its f32 bits) or an f16 (its 16 bits). The
// call keeps the largest |x| bits per threshold (an unsigned max: a
// reduction the vectoriser keeps in lanes, no mask shuffling) and compares
// once, when it publishes the status.
void KernelStorage::raiseStatusFrom(Value *x, uint32_t threshold) {
  const unsigned width = x->getType()->getPrimitiveSizeInBits();
  llvm::Type *bits = b_.getIntNTy(width);
  llvm::AllocaInst *&largest = largest_magnitude_[{width, threshold}];
  if (!largest) {
    llvm::BasicBlock &entry = fn_->getEntryBlock();
    llvm::IRBuilder<> at_entry(&entry, entry.begin());
    largest = at_entry.CreateAlloca(bits, nullptr, "largest.magnitude");
    at_entry.CreateStore(llvm::ConstantInt::get(bits, 0), largest);
  }
  Value *magnitude = b_.CreateAnd(b_.CreateBitCast(x, bits),
                                  llvm::ConstantInt::get(bits, (1ull << (width - 1)) - 1));
  Value *seen = b_.CreateLoad(bits, largest);
  b_.CreateStore(b_.CreateIntrinsic(llvm::Intrinsic::umax, {bits}, {seen, magnitude}), largest);
}

// An f32 value rounded to what `dtype` stores, as ir/float16.cpp rounds it,
// raising the status where ir/float16.cpp does (ir/float_status.h).
Value *KernelStorage::roundTo(Value *x, DType dtype) {
  // Rounding is idempotent: a value an op's lowering rounded already is
  // stored as it is (and raises the status once).
  if (auto it = rounded_.find(x); it != rounded_.end() && it->second == dtype)
    return x;
  return markRounded(roundUncached(x, dtype), dtype);
}

Value *KernelStorage::markRounded(Value *x, DType dtype) {
  rounded_[x] = dtype;
  return x;
}

Value *KernelStorage::roundUncached(Value *x, DType dtype) {
  const bool saturate = overflow_ == OverflowMode::Saturation;
  switch (dtype) {
  case DType::F32:
    raiseStatusFrom(x, kInfBits);
    return saturate ? clamp(x, FLT_MAX) : x;
  case DType::F16: {
    // fptrunc gives inf where rounding overflows and keeps NaN: the 16-bit
    // result tells, in lanes twice as narrow as the f32 input's.
    Value *half = b_.CreateFPTrunc(x, b_.getHalfTy());
    raiseStatusFrom(half, kHalfInfBits);
    Value *h = b_.CreateFPExt(half, b_.getFloatTy());
    if (!saturate)
      return h;
    Value *inf = b_.CreateFCmpOEQ(intrinsic(b_, llvm::Intrinsic::fabs, {h}),
                                  f32Constant(b_, std::numeric_limits<float>::infinity()));
    h = b_.CreateSelect(inf,
                        intrinsic(b_, llvm::Intrinsic::copysign, {f32Constant(b_, kF16Max), x}), h);
    return b_.CreateSelect(b_.CreateFCmpUNO(x, x),
                           intrinsic(b_, llvm::Intrinsic::copysign, {f32Constant(b_, 0), x}), h);
  }
  case DType::BF16: {
    if (saturate)
      raiseStatusFrom(x, kBF16BeyondMaxBits);
    Value *v = saturate ? clamp(x, kBF16Max) : x;
    Value *bits = b_.CreateBitCast(v, b_.getInt32Ty());
    Value *lsb = b_.CreateAnd(b_.CreateLShr(bits, 16), b_.getInt32(1));
    Value *rounded = b_.CreateAnd(b_.CreateAdd(bits, b_.CreateAdd(lsb, b_.getInt32(0x7fff))),
                                  b_.getInt32(0xffff0000u));
    if (!saturate) {
      Value *quiet =
          b_.CreateOr(b_.CreateAnd(bits, b_.getInt32(0xffff0000u)), b_.getInt32(0x00400000));
      rounded = b_.CreateSelect(b_.CreateFCmpUNO(v, v), quiet, rounded);
    }
    Value *result = b_.CreateBitCast(rounded, b_.getFloatTy());
    if (!saturate) // rounded to inf, or NaN
      raiseStatusFrom(result, kInfBits);
    return result;
  }
  default:
    return x;
  }
}

llvm::Type *KernelStorage::type(DType d) {
  switch (d) {
  case DType::F32:
    return b_.getFloatTy();
  case DType::F16:
    return b_.getHalfTy();
  case DType::BF16:
    return b_.getInt16Ty();
  case DType::I32:
    return b_.getInt32Ty();
  case DType::I64:
    return b_.getInt64Ty();
  case DType::Bool:
    return b_.getInt8Ty();
  }
  return nullptr;
}

Value *KernelStorage::pointer(Value *base, DType dtype, Value *flat) {
  return b_.CreateInBoundsGEP(type(dtype), base, flat);
}

Value *KernelStorage::load(Value *ptr, DType dtype) {
  Value *raw = b_.CreateLoad(type(dtype), ptr);
  switch (dtype) {
  case DType::F32:
    return raw;
  // A 16-bit value is what rounding to its dtype gives: storing it again
  // (a copy, a transpose) needs no rounding. Its inf or NaN was counted
  // by the kernel that stored it (a graph input's by the caller).
  case DType::F16:
    return markRounded(b_.CreateFPExt(raw, b_.getFloatTy()), dtype);
  case DType::BF16:
    return markRounded(
        b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(raw, b_.getInt32Ty()), 16), b_.getFloatTy()),
        dtype);
  case DType::I32:
    return b_.CreateSExt(raw, b_.getInt64Ty());
  case DType::I64:
    return raw;
  case DType::Bool:
    return b_.CreateICmpNE(raw, b_.getInt8(0));
  }
  return nullptr;
}

void KernelStorage::store(Value *v, DType dtype, Value *ptr) {
  switch (dtype) {
  case DType::F32:
    b_.CreateStore(roundTo(v, DType::F32), ptr);
    return;
  case DType::F16:
    b_.CreateStore(b_.CreateFPTrunc(roundTo(v, DType::F16), b_.getHalfTy()), ptr);
    return;
  case DType::BF16: {
    Value *bits = b_.CreateBitCast(roundTo(v, DType::BF16), b_.getInt32Ty());
    b_.CreateStore(b_.CreateTrunc(b_.CreateLShr(bits, 16), b_.getInt16Ty()), ptr);
    return;
  }
  case DType::I32:
    b_.CreateStore(b_.CreateTrunc(v, b_.getInt32Ty()), ptr);
    return;
  case DType::I64:
    b_.CreateStore(v, ptr);
    return;
  case DType::Bool:
    b_.CreateStore(b_.CreateZExt(v, b_.getInt8Ty()), ptr);
    return;
  }
}

Value *KernelStorage::status() {
  Value *status = b_.getInt32(0);
  for (const auto &[key, largest] : largest_magnitude_) {
    llvm::Type *bits = largest->getAllocatedType();
    Value *reached =
        b_.CreateICmpUGE(b_.CreateLoad(bits, largest), llvm::ConstantInt::get(bits, key.second));
    status = b_.CreateOr(status, b_.CreateZExt(reached, b_.getInt32Ty()));
  }
  return status;
}

} // namespace kiln::codegen
