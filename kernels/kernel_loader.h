// Loads kernel objects into the running process (LLVM ORC's LLJIT) and hands
// out their entry points. Objects come from the kernel cache or an artifact;
// this is the seam a real NPU backend would replace with its own loader.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kernels/kernel_abi.h"
#include "support/error.h"

namespace kiln::kernels {

class KernelLoader {
public:
  static Expected<std::unique_ptr<KernelLoader>> create();
  ~KernelLoader();
  KernelLoader(const KernelLoader &) = delete;
  KernelLoader &operator=(const KernelLoader &) = delete;

  // Links `object` (once per symbol: loading a symbol again returns the first
  // one) and returns the address of `symbol`. With KILN_PERF_MAP=1 in the
  // environment the kernel is also listed in /tmp/perf-PID.map under
  // "kiln:<label>" (the symbol when no label is given), so `perf report`
  // names the JIT code it sampled.
  Expected<KernelEntry> load(std::string_view object, const std::string &symbol,
                             std::string_view label = {});

private:
  struct Impl;
  explicit KernelLoader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace kiln::kernels
