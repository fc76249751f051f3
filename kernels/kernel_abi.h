// The calling convention between a compiled kernel and whatever runs it: the
// one contract the code generator (compiler/codegen) writes objects to and
// the runtime (runtime/executor.h, through kernel_loader.h) calls them by.
//
// Every kernel is one function with the C signature
//
//   void kernel(void **buffers, void *scratch, int64_t row_begin, int64_t row_end,
//               uint32_t *status);
//
// `buffers` holds the program's inputs, then its stored outputs, in order
// (with a GEMM, the f32 accumulator is the last input); `scratch` holds
// kScratchSlotBytes per element of one row of the materialised stages
// (KernelProgram::scratchElementsPerRow), private to the calling thread;
// rows [row_begin, row_end) are computed, so tiles of one kernel run on
// several threads at once. Where rounding to a 16-bit dtype overflows
// (ir/float_status.h) the kernel ors kFloatStatusOverflow into `*status`,
// atomically, so the tiles of one launch may share one status word.
//
// A host library routine (library_kernels.h) a kernel calls for its rows has
//
//   void routine(void **buffers, int64_t row_begin, int64_t row_end,
//                uint32_t *status, const int64_t *args);
//
// with the kernel's buffers, rows and status word as the kernel got them.
#pragma once

#include <cstdint>

namespace kiln::kernels {

using KernelEntry = void (*)(void **buffers, void *scratch, int64_t row_begin, int64_t row_end,
                             uint32_t *status);

using LibraryRoutine = void (*)(void **buffers, int64_t row_begin, int64_t row_end,
                                uint32_t *status, const int64_t *args);

// Bytes of scratch per element of a row's materialised stages.
inline constexpr int64_t kScratchSlotBytes = 8;

} // namespace kiln::kernels
