// Shapes of a custom op from its compute: every index variable's extent is
// the extent of the input axes it indexes (all of them must agree), and an
// output's shape is the extents of its index list.
#pragma once

#include <optional>
#include <vector>

#include "ir/shape.h"
#include "ops/custom/ast.h"
#include "support/error.h"

namespace kiln::ops::custom {

// Errors unless each input has the rank the compute reads it with.
Status checkInputRanks(const Program &program, const std::vector<Shape> &inputs);

// The extent of every variable of `stmt` (by id), from the inputs' shapes
// (ranks already checked). A disagreement names the op, the variable and
// both input axes with their positions.
Expected<std::vector<int64_t>> variableExtents(const Program &program, const Statement &stmt,
                                               const std::vector<Shape> &inputs);

// The output types: shapes from the extents; dtypes from `output_dtypes`
// (a dtype the definition fixes), else the like_input's, else the one dtype
// all inputs share.
Expected<std::vector<TensorType>>
inferOutputs(const Program &program, const std::vector<TensorType> &inputs,
             const std::vector<std::optional<DType>> &output_dtypes);

} // namespace kiln::ops::custom
