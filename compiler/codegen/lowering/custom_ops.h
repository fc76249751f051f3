// Kernel lowerings of custom ops (docs/custom-ops.md): the compute of each
// op (ops/custom/ast.h, held by the op registry as OpImpl::compute) becomes
// kernel expressions; the kernel builder lowers any op without a lowering of
// its own this way.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/codegen/op_lowering.h"
#include "ops/custom/ast.h"
#include "ops/op_registry.h"
#include "support/error.h"

namespace kiln::codegen {

// Index variables become the output's vars and reduction variables; a sum,
// max or min becomes reduce() over a fresh reduction variable. A reduction
// that depends on only some of the output's indices (x[i, j] / sum(k, x[i, k]))
// or that sits inside another reduction is a stage of its own, computed once
// per row and read back.
Expected<std::vector<ExprRef>> lowerCustomOp(LowerContext &ctx,
                                             const ops::custom::Program &program);

// Whether the kernel builder can lower `op` of `ops`: a lowering of its own,
// or a custom op's compute.
bool hasLowering(std::string_view op, const ops::OpRegistry &ops);

} // namespace kiln::codegen
