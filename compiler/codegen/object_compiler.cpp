#include "compiler/codegen/object_compiler.h"

#include <algorithm>
#include <mutex>

#include <llvm/ADT/SmallVector.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>

#include "compiler/codegen/llvm_emitter.h"

namespace kiln::codegen {
namespace {

void initializeLlvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

Expected<std::unique_ptr<llvm::TargetMachine>> hostTargetMachine(int opt_level) {
  initializeLlvm();
  const HostDescription &host = hostDescription();
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(host.triple, error);
  if (!target)
    return Error("LLVM has no target for the host " + host.triple + ": " + error);
  llvm::TargetOptions options;
  auto level = opt_level >= 2 ? llvm::CodeGenOptLevel::Default : llvm::CodeGenOptLevel::None;
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      host.triple, host.cpu, host.features, options, llvm::Reloc::PIC_, std::nullopt, level));
  if (!tm)
    return Error("LLVM could not create a target machine for " + host.toString());
  return tm;
}

// exp, log and tanh vectorise into glibc's libmvec (the kernel loader loads
// it) instead of one scalar libm call per element: its SSE form, and its
// AVX2 and AVX-512 forms where the target machine has those units (a form
// the host lacks would fault; a 16-lane call needs a zmm register), within
// 4 ulp. Not sin and cos: libmvec's lose accuracy on the thousands of
// radians of long rotary tables, where the reference keeps it.
std::vector<llvm::VecDesc> vectorMath(const llvm::TargetMachine &tm) {
  const std::string features = tm.getTargetFeatureString().str() + ",";
  const bool avx2 = features.find("+avx2,") != std::string::npos;
  const bool avx512 = features.find("+avx512f,") != std::string::npos;
  struct Function {
    const char *libm, *intrinsic, *sse, *avx2, *avx512;
  };
  static constexpr Function kFunctions[] = {
      {"expf", "llvm.exp.f32", "_ZGVbN4v_expf", "_ZGVdN8v_expf", "_ZGVeN16v_expf"},
      {"logf", "llvm.log.f32", "_ZGVbN4v_logf", "_ZGVdN8v_logf", "_ZGVeN16v_logf"},
      {"tanhf", "llvm.tanh.f32", "_ZGVbN4v_tanhf", "_ZGVdN8v_tanhf", "_ZGVeN16v_tanhf"},
  };
  std::vector<llvm::VecDesc> fns;
  for (const Function &f : kFunctions)
    for (const char *scalar : {f.libm, f.intrinsic}) {
      fns.emplace_back(scalar, f.sse, llvm::ElementCount::getFixed(4), false, "_ZGV_LLVM_N4v");
      if (avx2)
        fns.emplace_back(scalar, f.avx2, llvm::ElementCount::getFixed(8), false, "_ZGV_LLVM_N8v");
      if (avx512)
        fns.emplace_back(scalar, f.avx512, llvm::ElementCount::getFixed(16), false,
                         "_ZGV_LLVM_N16v");
    }
  return fns;
}

void optimize(llvm::Module &module, llvm::TargetMachine &tm, int opt_level) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  llvm::PassBuilder pb(&tm, tuning);
  llvm::TargetLibraryInfoImpl library(tm.getTargetTriple());
  library.addVectorizableFunctions(vectorMath(tm));
  fam.registerPass([&] { return llvm::TargetLibraryAnalysis(library); });
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  const llvm::OptimizationLevel level =
      opt_level >= 3 ? llvm::OptimizationLevel::O3
                     : (opt_level >= 2 ? llvm::OptimizationLevel::O2 : llvm::OptimizationLevel::O1);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(level);
  mpm.run(module, mam);
}

} // namespace

const HostDescription &hostDescription() {
  static const HostDescription host = [] {
    HostDescription h;
    h.triple = llvm::sys::getProcessTriple();
    h.cpu = llvm::sys::getHostCPUName().str();
    std::vector<std::string> features;
    for (const auto &[name, on] : llvm::sys::getHostCPUFeatures())
      features.push_back((on ? "+" : "-") + name.str());
    std::sort(features.begin(), features.end());
    for (size_t i = 0; i < features.size(); ++i)
      h.features += (i ? "," : "") + features[i];
    return h;
  }();
  return host;
}

std::string llvmVersion() { return LLVM_VERSION_STRING; }

std::string ObjectOptions::toString() const {
  return "overflow=" + std::string(overflowModeName(overflow)) + " opt=O" +
         std::to_string(opt_level);
}

Expected<std::string> compileKernelObject(const KernelProgram &program,
                                          const std::string &function_name,
                                          const ObjectOptions &options, std::string *ir_dump) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<llvm::TargetMachine> tm,
                        hostTargetMachine(options.opt_level));
  llvm::LLVMContext context;
  llvm::Module module(function_name, context);
  module.setTargetTriple(tm->getTargetTriple().str());
  module.setDataLayout(tm->createDataLayout());
  KILN_RETURN_IF_ERROR(emitKernel(program, function_name, options.overflow, module));
  // Every kernel function uses the host's CPU and features.
  for (llvm::Function &f : module) {
    f.addFnAttr("target-cpu", tm->getTargetCPU());
    f.addFnAttr("target-features", tm->getTargetFeatureString());
  }
  optimize(module, *tm, options.opt_level);
  if (ir_dump) {
    llvm::raw_string_ostream os(*ir_dump);
    module.print(os, nullptr);
  }
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream out(buffer);
  llvm::legacy::PassManager codegen;
  if (tm->addPassesToEmitFile(codegen, out, nullptr, llvm::CodeGenFileType::ObjectFile))
    return Error("LLVM cannot emit object files for " + hostDescription().toString());
  codegen.run(module);
  return std::string(buffer.begin(), buffer.end());
}

} // namespace kiln::codegen
