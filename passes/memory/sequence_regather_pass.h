// SequenceRegatherPass: sequence parallelism keeps each rank's slice of the
// sequence, not the gathered whole, from the forward to the backward
// (regatherSequenceSlices, passes/memory/recompute_pass.h).
#pragma once

#include "passes/pass.h"

namespace kiln::passes {

class SequenceRegatherPass final : public Pass {
public:
  const PassInfo &info() const override;
  Verdict appliesTo(const PassContext &ctx) const override;
  Expected<PassResult> run(Graph &graph, const PassContext &ctx) const override;
};

} // namespace kiln::passes
