#include "kernels/kernel_loader.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include <unistd.h>

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Object/SymbolSize.h>
#include <llvm/Support/DynamicLibrary.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>

#include "ir/float16.h"
#include "kernels/library_kernels.h"

namespace kiln::kernels {
namespace {

// The half-precision conversions LLVM calls when the CPU lacks F16C.
extern "C" float kilnExtendHalf(uint16_t bits) { return halfToFloat(bits); }
extern "C" uint16_t kilnTruncateHalf(float value) {
  return floatToHalf(value, OverflowMode::InfNan);
}

} // namespace

// perf's map of JIT code (tools/perf/Documentation/jit-interface.txt): one
// "START SIZE NAME" line per function in /tmp/perf-PID.map, read by perf
// report as it is, with no perf inject step.
class PerfMap {
public:
  PerfMap() {
    const char *on = std::getenv("KILN_PERF_MAP");
    if (on && *on && std::string_view(on) != "0")
      file_ = std::fopen(("/tmp/perf-" + std::to_string(getpid()) + ".map").c_str(), "a");
  }
  ~PerfMap() {
    if (file_)
      std::fclose(file_);
  }
  bool enabled() const { return file_ != nullptr; }
  void add(uint64_t address, uint64_t size, std::string_view name) {
    std::fprintf(file_, "%llx %llx kiln:%.*s\n", static_cast<unsigned long long>(address),
                 static_cast<unsigned long long>(size), static_cast<int>(name.size()), name.data());
    std::fflush(file_);
  }

private:
  std::FILE *file_ = nullptr;
};

// How many bytes of code `symbol` spans: from it to the end of its section
// (a kernel object holds one function; its symbol table records no sizes).
uint64_t symbolSize(std::string_view object, const std::string &symbol) {
  // A copy: the ELF reader needs the object aligned.
  auto buffer =
      llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(object.data(), object.size()), symbol);
  auto file = llvm::object::ObjectFile::createObjectFile(buffer->getMemBufferRef());
  if (!file) {
    llvm::consumeError(file.takeError());
    return 0;
  }
  for (const llvm::object::SymbolRef &sym : (*file)->symbols()) {
    auto name = sym.getName();
    auto section = sym.getSection();
    auto offset = sym.getValue();
    if (!name || !section || !offset || *section == (*file)->section_end() || *name != symbol) {
      llvm::consumeError(name.takeError());
      llvm::consumeError(section.takeError());
      llvm::consumeError(offset.takeError());
      continue;
    }
    return (*section)->getSize() - *offset;
  }
  return 0;
}

struct KernelLoader::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::mutex mutex;
  std::map<std::string, KernelEntry> loaded;
  PerfMap perf_map;
};

KernelLoader::KernelLoader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KernelLoader::~KernelLoader() = default;

Expected<std::unique_ptr<KernelLoader>> KernelLoader::create() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  auto jit = llvm::orc::LLJITBuilder().create();
  if (!jit)
    return Error("cannot start the kernel loader (LLVM ORC): " + llvm::toString(jit.takeError()));
  llvm::orc::JITDylib &main = (*jit)->getMainJITDylib();
  // The vector math the kernels call (object_compiler.cpp vectorises exp,
  // log and tanh into glibc's libmvec).
  std::string error;
  if (llvm::sys::DynamicLibrary::LoadLibraryPermanently("libmvec.so.1", &error))
    return Error("cannot load glibc's vector math library libmvec.so.1: " + error);
  // Kernels call libm (expf, logf, ...) from this process.
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      (*jit)->getDataLayout().getGlobalPrefix());
  if (!process)
    return Error("cannot expose libm to kernels: " + llvm::toString(process.takeError()));
  main.addGenerator(std::move(*process));
  llvm::orc::SymbolMap helpers;
  auto &es = (*jit)->getExecutionSession();
  helpers[es.intern("__extendhfsf2")] = {llvm::orc::ExecutorAddr::fromPtr(&kilnExtendHalf),
                                         llvm::JITSymbolFlags::Exported};
  helpers[es.intern("__truncsfhf2")] = {llvm::orc::ExecutorAddr::fromPtr(&kilnTruncateHalf),
                                        llvm::JITSymbolFlags::Exported};
  for (const LibraryKernel &k : libraryKernels())
    helpers[es.intern(k.symbol)] = {llvm::orc::ExecutorAddr::fromPtr(k.routine),
                                    llvm::JITSymbolFlags::Exported};
  if (auto err = main.define(llvm::orc::absoluteSymbols(std::move(helpers))))
    return Error("cannot define kernel helpers: " + llvm::toString(std::move(err)));
  auto impl = std::make_unique<Impl>();
  impl->jit = std::move(*jit);
  return std::unique_ptr<KernelLoader>(new KernelLoader(std::move(impl)));
}

Expected<KernelEntry> KernelLoader::load(std::string_view object, const std::string &symbol,
                                         std::string_view label) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (auto it = impl_->loaded.find(symbol); it != impl_->loaded.end())
    return it->second;
  auto buffer =
      llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(object.data(), object.size()), symbol);
  if (auto err = impl_->jit->addObjectFile(std::move(buffer)))
    return Error("cannot link kernel object '" + symbol + "': " + llvm::toString(std::move(err)));
  auto address = impl_->jit->lookup(symbol);
  if (!address)
    return Error("kernel object does not define '" + symbol +
                 "': " + llvm::toString(address.takeError()));
  auto entry = address->toPtr<KernelEntry>();
  impl_->loaded[symbol] = entry;
  if (impl_->perf_map.enabled())
    impl_->perf_map.add(address->getValue(), symbolSize(object, symbol),
                        label.empty() ? std::string_view(symbol) : label);
  return entry;
}

} // namespace kiln::kernels
