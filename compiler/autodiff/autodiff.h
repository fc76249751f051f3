// Reverse-mode differentiation over the graph IR.
//
// Walks the nodes that lie between the wrt values and the target in reverse
// topological order, calls each op's gradient rule, and sums the
// contributions of a value used several times with AddN. Gradient nodes are
// named "grad.<forward node name>..." and carry provenance
// {pass: "autodiff", origins: [forward node]}.
#pragma once

#include <vector>

#include "ir/graph.h"
#include "ops/op_builder.h"
#include "support/error.h"

namespace kiln::autodiff {

// Appends to the builder's graph the gradient of the scalar `target` with
// respect to each of `wrt`, seeded with d target = 1. Returns one value per
// `wrt` entry; a value the target does not depend on gets a zero Fill.
Expected<std::vector<ValueId>> gradients(ops::OpBuilder &builder, ValueId target,
                                         const std::vector<ValueId> &wrt);

} // namespace kiln::autodiff
