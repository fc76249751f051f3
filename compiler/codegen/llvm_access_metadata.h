// Metadata on a generated kernel's memory accesses (private to
// llvm_emitter.cpp): what the kernel knows of aliasing that LLVM cannot
// prove, so that its loops vectorise.
#pragma once

#include <vector>

#include <llvm/IR/Function.h>
#include <llvm/IR/Instructions.h>

namespace kiln::codegen {

// Each materialised stage's part of scratch as an alias scope of its own: a
// loop writing a held row (softmax's exp) reads the row max beside it, and
// without the scopes LLVM cannot tell the two apart and leaves the loop
// scalar.
class ScratchScopes {
public:
  // `materialized[s]`: whether stage s lies in scratch.
  ScratchScopes(llvm::LLVMContext &ctx, std::vector<bool> materialized)
      : ctx_(ctx), materialized_(std::move(materialized)) {}
  // Puts `access` of stage `stage`'s scratch in the stage's scope, apart
  // from every other stage's.
  void tag(llvm::Instruction *access, size_t stage);

private:
  llvm::LLVMContext &ctx_;
  std::vector<bool> materialized_;
  std::vector<llvm::MDNode *> scopes_; // per stage, made at the first tag
};

// Declares the loop from `header` to `latch` (its back edge) free of
// loop-carried memory dependences (llvm.loop.parallel_accesses): every load
// and store in `body` joins one access group. For a loop whose iterations
// each read and write their own elements: the vectoriser then needs no
// runtime check that the tensors' pointers do not overlap, so the loop runs
// vectorised even where an output is written over the input it reads (an
// update in place), where the check would send it down the scalar loop.
void markParallelLoop(const std::vector<llvm::BasicBlock *> &body, llvm::BranchInst *latch);

} // namespace kiln::codegen
