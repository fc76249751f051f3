// Checks every node against its op definition: known op, input count and
// dtypes, attributes, and that the recorded output types are what shape
// inference gives.
#pragma once

#include "ir/graph.h"
#include "ops/op_registry.h"
#include "support/error.h"

namespace kiln::ops {

// Structural checks (ir/verifier.h) plus the op checks above, against the
// ops of the graph's vocabulary (opsOf).
Status verifyGraph(const Graph &graph);

} // namespace kiln::ops
