// Folds chains of Reshapes and of Transposes, and drops the identity ones.
#pragma once

#include "ir/graph.h"
#include "passes/pass.h"

namespace kiln::passes {

// The driver, callable without the pass manager; nodes must be in
// topological order. Reshape(Reshape(x)) -> Reshape(x); Transpose(Transpose(x))
// -> Transpose(x) with the composed perm; a Reshape to its input's shape and a
// Transpose with the identity perm are replaced by their input. A rewritten
// node keeps its name; inner nodes left without users are erased.
PassResult foldReshapesAndTransposes(Graph &graph);

class ReshapeTransposeFoldingPass final : public Pass {
public:
  const PassInfo &info() const override;
  Expected<PassResult> run(Graph &graph, const PassContext &ctx) const override;
};

} // namespace kiln::passes
