// Structural checks of a graph that need no knowledge of ops: SSA order,
// unique names, consistent tables. Op signatures are checked in ops/.
#pragma once

#include "ir/graph.h"
#include "support/error.h"

namespace kiln {

// Returns the first violation, naming the node or value involved.
Status verifyStructure(const Graph &graph);

} // namespace kiln
