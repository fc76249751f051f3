// Constant folding over splats: a node whose inputs are all Fill outputs
// becomes one Fill when its result is provably a splat (see the .cpp for the
// allow-list and how values are computed).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/dtype.h"
#include "ir/graph.h"
#include "passes/pass.h"

namespace kiln::passes {

struct ConstantFoldingOptions {
  // A fold must give the same bits under every one of these modes: the job's
  // overflow mode is not in the PassContext yet, so the pass asks for every
  // mode the target supports.
  std::vector<OverflowMode> modes = {OverflowMode::InfNan};
  // Reductions are evaluated on whole materialised inputs up to this size.
  int64_t max_reduce_elements = int64_t{1} << 16;
};

// The driver, callable without the pass manager. Nodes must be in
// topological order; folded nodes are rewritten in place (a multi-output node
// is replaced by appended Fills and erased).
PassResult foldConstants(Graph &graph, const ConstantFoldingOptions &options);

class ConstantFoldingPass final : public Pass {
public:
  const PassInfo &info() const override;
  Expected<PassResult> run(Graph &graph, const PassContext &ctx) const override;
};

} // namespace kiln::passes
