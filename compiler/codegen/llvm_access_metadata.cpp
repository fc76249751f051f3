#include "compiler/codegen/llvm_access_metadata.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Metadata.h>

namespace kiln::codegen {

void ScratchScopes::tag(llvm::Instruction *access, size_t stage) {
  if (scopes_.empty()) {
    llvm::MDBuilder md(ctx_);
    llvm::MDNode *domain = md.createAnonymousAliasScopeDomain("scratch");
    for (size_t s = 0; s < materialized_.size(); ++s)
      scopes_.push_back(md.createAnonymousAliasScope(domain));
  }
  std::vector<llvm::Metadata *> others;
  for (size_t s = 0; s < scopes_.size(); ++s)
    if (s != stage && materialized_[s])
      others.push_back(scopes_[s]);
  access->setMetadata(llvm::LLVMContext::MD_alias_scope, llvm::MDNode::get(ctx_, {scopes_[stage]}));
  access->setMetadata(llvm::LLVMContext::MD_noalias, llvm::MDNode::get(ctx_, others));
}

void markParallelLoop(const std::vector<llvm::BasicBlock *> &body, llvm::BranchInst *latch) {
  llvm::LLVMContext &ctx = latch->getContext();
  llvm::MDNode *group = llvm::MDNode::getDistinct(ctx, {});
  for (llvm::BasicBlock *block : body)
    for (llvm::Instruction &inst : *block)
      if (llvm::isa<llvm::LoadInst>(inst) || llvm::isa<llvm::StoreInst>(inst))
        inst.setMetadata(llvm::LLVMContext::MD_access_group, group);
  llvm::Metadata *parallel[] = {llvm::MDString::get(ctx, "llvm.loop.parallel_accesses"), group};
  llvm::MDNode *property = llvm::MDNode::get(ctx, parallel);
  // A loop ID names itself first.
  llvm::TempMDTuple self = llvm::MDNode::getTemporary(ctx, {});
  llvm::Metadata *operands[] = {self.get(), property};
  llvm::MDNode *id = llvm::MDNode::getDistinct(ctx, operands);
  id->replaceOperandWith(0, id);
  latch->setMetadata(llvm::LLVMContext::MD_loop, id);
}

} // namespace kiln::codegen
