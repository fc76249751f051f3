// Dead code elimination: nodes none of whose outputs reach a graph output.
#pragma once

#include "ir/graph.h"
#include "passes/pass.h"

namespace kiln::passes {

// The driver, callable without the pass manager (any node order). Marks
// what the graph outputs need, transitively, and erases the rest; graph
// inputs stay, even when nothing reads them.
PassResult eliminateDeadCode(Graph &graph);

class DeadCodeEliminationPass final : public Pass {
public:
  const PassInfo &info() const override;
  Expected<PassResult> run(Graph &graph, const PassContext &ctx) const override;
};

} // namespace kiln::passes
