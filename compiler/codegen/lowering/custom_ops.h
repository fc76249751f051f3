// Kernel lowerings of custom ops (docs/custom-ops.md): the compute of each
// op (ops/custom/ast.h) becomes kernel expressions, registered when the op
// is loaded (compiler/frontend/custom_ops.h) rather than at start-up.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/codegen/op_lowering.h"
#include "ir/error.h"
#include "ops/custom/ast.h"

namespace kiln::codegen {

// Index variables become the output's vars and reduction variables; a sum,
// max or min becomes reduce() over a fresh reduction variable. A reduction
// that depends on only some of the output's indices (x[i, j] / sum(k, x[i, k]))
// or that sits inside another reduction is a stage of its own, computed once
// per row and read back.
Expected<std::vector<ExprRef>> lowerCustomOp(LowerContext &ctx,
                                             const ops::custom::Program &program);

// Registers the lowering of custom op `op`. An error when `op` has one already.
Status registerCustomOpLowering(const std::string &op,
                                std::shared_ptr<const ops::custom::Program> program);

} // namespace kiln::codegen
