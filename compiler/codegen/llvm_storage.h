// How a generated kernel reads and writes each storage dtype (private to
// llvm_emitter.cpp): loads widen to the kernel's scalar types; stores round
// f32 results to the storage dtype bit for bit as ir/float16.cpp rounds
// them, saturating or not by the kernel's overflow mode, and raise the float
// status where that rounding overflows (ir/float_status.h).
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include <llvm/IR/IRBuilder.h>

#include "ir/dtype.h"

namespace kiln::codegen {

// An intrinsic of the type of its first argument; an f32 constant.
llvm::Value *intrinsic(llvm::IRBuilder<> &b, llvm::Intrinsic::ID id,
                       std::vector<llvm::Value *> args);
llvm::Value *f32Constant(llvm::IRBuilder<> &b, double v);

class KernelStorage {
public:
  KernelStorage(llvm::IRBuilder<> &b, OverflowMode overflow) : b_(b), overflow_(overflow) {}

  // The kernel function, whose entry block holds the status accumulators.
  void setFunction(llvm::Function *fn) { fn_ = fn; }

  llvm::Type *type(DType dtype);
  // &base[flat] for elements of `dtype`.
  llvm::Value *pointer(llvm::Value *base, DType dtype, llvm::Value *flat);
  // The element at `ptr` as the kernel computes with it: f32, i64 or i1.
  llvm::Value *load(llvm::Value *ptr, DType dtype);
  // `v` rounded (roundTo) and stored at `ptr` as `dtype`.
  void store(llvm::Value *v, DType dtype, llvm::Value *ptr);

  // An f32 value rounded to what `dtype` stores, as ir/float16.cpp rounds it,
  // raising the status where ir/float16.cpp does. Rounding is idempotent: a
  // value rounded already (or marked so) is returned as it is and raises
  // the status once.
  llvm::Value *roundTo(llvm::Value *x, DType dtype);
  // Records that `x` already holds a value of `dtype` (a 16-bit load).
  llvm::Value *markRounded(llvm::Value *x, DType dtype);

  // The call's status (i32, kFloatStatusOverflow or 0), emitted where the
  // builder stands: whether any accumulated magnitude reached its threshold.
  llvm::Value *status();

private:
  // x with NaN -> +-0 and +-inf clamped to +-max: the saturation of ir/float16.cpp.
  llvm::Value *clamp(llvm::Value *x, float max);
  void raiseStatusFrom(llvm::Value *x, uint32_t threshold);
  llvm::Value *roundUncached(llvm::Value *x, DType dtype);

  llvm::IRBuilder<> &b_;
  OverflowMode overflow_;
  llvm::Function *fn_ = nullptr;
  std::map<llvm::Value *, DType> rounded_; // roundTo's results, by the dtype they hold
  // Per (bit width, overflow threshold), the largest |value| bits rounded.
  std::map<std::pair<unsigned, uint32_t>, llvm::AllocaInst *> largest_magnitude_;
};

} // namespace kiln::codegen
