// The NPU's float-status register as the reference numerics see it. On the
// chip every vector or cube instruction whose result overflows its dtype sets
// a sticky bit that software reads and clears around a step (MindSpore's
// NPUGetFloatStatus / NPUClearFloatStatus, CANN's aclrtGetOverflowStatus /
// aclrtResetOverflowStatus). What sets it depends on the overflow mode:
//
//   saturation: a result clamped to the largest finite value, or a NaN
//               turned into 0 (the stored value is finite: the flag is the
//               only trace of the overflow);
//   infnan:     an inf or NaN result.
//
// ir/float16.cpp raises the calling thread's status wherever it rounds so;
// generated kernels raise a per-call status word the same way
// (compiler/codegen/llvm_emitter.h), and the runtime keeps one register per
// device (runtime/float_status.h).
#pragma once

#include <cstdint>

#include "ir/dtype.h"

namespace kiln {

// The one bit kiln models: "a result overflowed". The chip has more (one per
// unit and kind); software only ever tests whether any is set.
inline constexpr uint32_t kFloatStatusOverflow = 1;

// Sets kFloatStatusOverflow in the calling thread's status.
void raiseFloatStatus();

// The calling thread's status, cleared.
uint32_t takeFloatStatus();

} // namespace kiln
