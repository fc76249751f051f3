// Building a kernel's program from its member nodes: each node is lowered
// (op_lowering.h) and its results rounded as the fused kernel's numerics say,
// the same rules the reference interpreter follows:
//
//   a single op, or a group with Storage intermediates:
//       every node's float results round to their dtype (the vector unit's
//       per-op store), so fusing changes no bit;
//   a group with F32 intermediates:
//       values stay f32 inside; only Casts round, and the kernel's outputs
//       round once when stored.
//
// A kernel holding a MatMul or BatchMatMul is a GEMM followed by an epilogue:
// the GEMM (a BLAS call) writes the f32 accumulator, which the epilogue
// program reads as one more input, exactly where FixPipe reads L0C.
#pragma once

#include <optional>

#include "compiler/codegen/kernel_program.h"
#include "compiler/codegen/kernel_spec.h"
#include "kernels/gemm.h"
#include "support/error.h"

namespace kiln::codegen {

using kernels::GemmPlan; // the GEMM half, run by kernels/gemm.h

struct KernelBuild {
  KernelProgram program; // with a GEMM: its last input is the accumulator
  std::optional<GemmPlan> gemm;
};

Expected<KernelBuild> buildKernel(const Graph &graph, const KernelSpec &kernel);

} // namespace kiln::codegen
