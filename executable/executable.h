// A compiled graph's kernels as whatever runs them reads them: per kernel the
// values it reads and stores, its entry point in one of the objects, the rows
// a launch splits into and the GEMM it starts with. The compiler makes it
// (compiler/codegen/kernel_compiler.h, or an artifact's loader); the runtime
// (runtime/executor.h) loads the objects and calls each entry through
// kernels/kernel_abi.h. Data only: nothing here generates code, as XLA's
// Executable holds what its compiler made for the runtime to run.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "executable/kernel_spec.h"
#include "ir/dtype.h"
#include "kernels/gemm.h"

namespace kiln::executable {

// How a launch walks the kernel's rows (kernels/kernel_abi.h): what the
// runtime needs of the kernel's program to split it into tiles, give each
// thread its scratch and add the tiles' row sums.
struct KernelLaunch {
  int64_t rows = 0; // rows [0, rows) of every stored output
  // A row's elements in the first output, or in an input of the same rows
  // where more (at least 1): the work a tile's size is measured in.
  int64_t row_elements = 1;
  int64_t scratch_elements_per_row = 0; // of the materialised stages, kScratchSlotBytes each
  // A GEMM whose f32 accumulator is read only within the row being computed:
  // each tile may run its GEMM rows and then its epilogue while they are hot.
  bool accumulator_row_local = false;
  // The kernel's one output is its GEMM's f32 result as it is: the runtime
  // may have the GEMM write it and check it for inf and NaN itself.
  bool output_is_accumulator = false;
  // Per stored output: a row sum, added over the tiles in f32 after them.
  std::vector<char> row_sums;
};

// The tiling the NPU would launch the kernel with, as the target check
// found it fits (compiler/codegen/target_check.h).
struct KernelTiling {
  int64_t vector_tile_elements = 0; // the tile the kernel streams in
  int64_t ub_bytes = 0;             // the working set in the UB model
  int64_t resident_row_bytes = 0;   // the part held per row (fused row kernels)
  // Matmul kernels: the output tile (m, n) and its L0C bytes.
  std::array<int64_t, 2> cube_out_tile{0, 0};
  int64_t l0c_bytes = 0;
};

struct CompiledKernel {
  KernelSpec spec;
  std::optional<kernels::GemmPlan> gemm; // a matmul kernel: the GEMM its epilogue reads
  KernelLaunch launch;
  KernelTiling tiling;
  std::string key;    // cache key, hex
  std::string symbol; // the entry point in the object
  int object = -1;    // index into Executable::objects, shared by identical kernels
  // No object: the op's reference kernel runs on the host, as a fallback or
  // because the op is a collective (then the runtime runs it across the
  // devices of its group).
  bool host = false;
  bool collective = false;
};

struct Executable {
  OverflowMode overflow = OverflowMode::InfNan; // the rounding built into every kernel
  std::vector<CompiledKernel> kernels;          // in execution order
  std::vector<std::string> objects;             // one object per distinct kernel

  // Distinct kernels (identical layers share one), objects made or not.
  int64_t distinctKernels() const {
    std::set<int> distinct;
    for (const CompiledKernel &k : kernels)
      if (!k.host)
        distinct.insert(k.object);
    return static_cast<int64_t>(distinct.size());
  }
};

} // namespace kiln::executable
