#include "passes/memory/sequence_regather_pass.h"

#include "passes/memory/recompute_pass.h"
#include "passes/pass_context.h"
#include "passes/pass_registry.h"

namespace kiln::passes {

const PassInfo &SequenceRegatherPass::info() const {
  static const PassInfo info{
      .name = kSequenceRegatherPassName,
      .group = PassGroup::StepRewrite,
      .default_on = true,
      .may_disable = true,
      .summary = "Under --sequence-parallel, keeps each rank's slice of the sequence for the "
                 "backward and gathers it again there",
      .description =
          "Sequence parallelism gathers the ranks' slices of the sequence before each "
          "column-parallel projection (TensorParallelAllGather). The projection's weight "
          "gradient reads that gathered input again in the backward; instead of keeping the "
          "whole sequence alive from the forward to the backward, the backward gathers the "
          "slice again (Megatron's sequence parallelism, Korthikanti et al. 2022, 4.2.2): "
          "one more all-gather a projection, 1/t of the bytes kept. The copy is the same op on "
          "the same slice, so results are bit for bit those without it. Does nothing without "
          "sequence parallelism or a backward."};
  return info;
}

Verdict SequenceRegatherPass::appliesTo(const PassContext &) const { return Verdict::allow(); }

Expected<PassResult> SequenceRegatherPass::run(Graph &graph, const PassContext &) const {
  return regatherSequenceSlices(graph);
}

KILN_REGISTER_PASS(SequenceRegatherPass);

} // namespace kiln::passes
