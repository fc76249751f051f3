// Common subexpression elimination: kiln ops are pure, so two nodes with the
// same op, inputs and attributes compute the same values.
#pragma once

#include "ir/graph.h"
#include "passes/pass.h"

namespace kiln::passes {

// The driver, callable without the pass manager; nodes must be in
// topological order. Of each set of equal nodes the first in order survives
// and the others' users read its outputs. Attributes compare bit for bit
// (0.0 and -0.0 differ, a NaN equals the same NaN); nodes merge only within
// one fusion group (or none). Hash-based: linear in the graph size.
PassResult eliminateCommonSubexpressions(Graph &graph);

class CommonSubexpressionEliminationPass final : public Pass {
public:
  const PassInfo &info() const override;
  Expected<PassResult> run(Graph &graph, const PassContext &ctx) const override;
};

} // namespace kiln::passes
