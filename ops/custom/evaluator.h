// The reference kernel of a custom op: evaluates its compute over each
// output's index space in double, as the built-in reference kernels do, and
// stores through f32 into the output's dtype per the overflow mode.
#pragma once

#include <vector>

#include "ir/attribute.h"
#include "ir/tensor.h"
#include "ops/custom/ast.h"
#include "ops/op_registry.h"
#include "support/error.h"

namespace kiln::ops::custom {

// `outputs` arrive allocated with the inferred types.
Status evaluateProgram(const Program &program, const KernelContext &ctx,
                       const std::vector<const Tensor *> &inputs, std::vector<Tensor> &outputs,
                       const AttrMap &attrs);

// A function of the language in double; max and min ignore a NaN operand,
// as the compiled kernels' maxnum and minnum do.
double applyFn(Fn fn, double a, double b = 0);

} // namespace kiln::ops::custom
