// See llvm_library_call.h.
#include "compiler/codegen/llvm_library_call.h"

namespace kiln::codegen {

void emitLibraryCall(llvm::IRBuilder<> &b, llvm::Module &module, llvm::Function *fn,
                     const KernelProgram &program, OverflowMode overflow) {
  llvm::Type *ptr = b.getPtrTy();
  llvm::Type *i64 = b.getInt64Ty();
  std::vector<llvm::Constant *> values;
  for (int64_t a : program.library_args)
    values.push_back(b.getInt64(a));
  values.push_back(b.getInt64(static_cast<int64_t>(overflow)));
  auto *array_type = llvm::ArrayType::get(i64, values.size());
  auto *args = new llvm::GlobalVariable(module, array_type, true, llvm::GlobalValue::PrivateLinkage,
                                        llvm::ConstantArray::get(array_type, values),
                                        fn->getName() + ".args");
  auto *routine_type = llvm::FunctionType::get(b.getVoidTy(), {ptr, i64, i64, ptr, ptr}, false);
  llvm::FunctionCallee routine = module.getOrInsertFunction(program.library, routine_type);
  b.SetInsertPoint(llvm::BasicBlock::Create(module.getContext(), "entry", fn));
  b.CreateCall(routine, {fn->getArg(0), fn->getArg(2), fn->getArg(3), fn->getArg(4), args});
  b.CreateRetVoid();
}

} // namespace kiln::codegen
