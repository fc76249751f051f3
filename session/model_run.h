// One run of a model's compiled kernels or of its reference interpreter,
// as `kiln run` makes it: the float status of the run kept (in saturation
// mode the only trace of an overflow), the kernels timed into an msprof
// folder when asked.
#pragma once

#include <string>

#include "compiler/codegen/compiled_kernels.h"
#include "ir/graph.h"
#include "ops/interpreter.h"
#include "runtime/float_status.h"

namespace kiln::session {

// Runs `graph`'s compiled `kernels` on `inputs`, timing each kernel into
// `profile_dir` (msprof's files, profiler.h) when it is not empty; every
// kernel that overflows raises `status`.
Expected<ops::TensorMap> runKernels(const Graph &graph, codegen::CompiledKernels kernels,
                                    const ops::TensorMap &inputs, const std::string &profile_dir,
                                    runtime::FloatStatus &status);

// Runs `graph` on the reference interpreter in `overflow` mode; the status
// its rounding raised goes into `status`.
Expected<ops::TensorMap> runInterpreter(const Graph &graph, const ops::TensorMap &inputs,
                                        OverflowMode overflow, runtime::FloatStatus &status);

// "'loss' is nan" for the first output (loss and grad_norm first) that
// holds inf or NaN; "" when all are finite.
std::string firstNonFinite(const ops::TensorMap &outputs);

} // namespace kiln::session
