// From a kernel program to a relocatable object for the host CPU: LLVM IR,
// the O2 pipeline with the host's CPU and features (so the loop vectoriser
// uses its SIMD width), then machine code.
#pragma once

#include <string>

#include "compiler/codegen/kernel_program.h"
#include "support/error.h"

namespace kiln::codegen {

struct HostDescription {
  std::string triple;
  std::string cpu;
  std::string features; // sorted "+avx2,+fma,..." as LLVM reports them
  std::string toString() const { return triple + " " + cpu + " " + features; }
};
// The host kiln runs on, as code generation sees it.
const HostDescription &hostDescription();
// The LLVM version kiln was built with, e.g. "19.1.7".
std::string llvmVersion();

struct ObjectOptions {
  OverflowMode overflow = OverflowMode::InfNan;
  int opt_level = 2;
  // The options' canonical text for the cache key.
  std::string toString() const;
};

// The object code of one kernel defining `function_name` (kernels/kernel_abi.h's
// signature); `ir_dump`, when not null, receives the optimised LLVM IR.
Expected<std::string> compileKernelObject(const KernelProgram &program,
                                          const std::string &function_name,
                                          const ObjectOptions &options,
                                          std::string *ir_dump = nullptr);

} // namespace kiln::codegen
