#include "passes/pipeline.h"

namespace kiln::passes {
namespace {

constexpr PipelineEntry kPipeline[] = {
    // Cleanup: fold and merge what the frontend and autodiff leave behind.
    {PassGroup::Cleanup, "ConstantFoldingPass", 100},
    {PassGroup::Cleanup, "ReshapeTransposeFoldingPass", 200},
    {PassGroup::Cleanup, "CommonSubexpressionEliminationPass", 300},
    {PassGroup::Cleanup, "DeadCodeEliminationPass", 400},
    // Precision: the job's precision mode, then the casts it leaves.
    {PassGroup::Precision, "PrecisionModePass", 100},
    {PassGroup::Precision, "AttentionFp32CastPass", 200},
    {PassGroup::Precision, "CastEliminationPass", 300},
    // A Cast after a Reshape moves above it, next to the kernel that can take it.
    {PassGroup::Precision, "CastBeforeReshapePass", 400},
    // StepRewrite: rewrites of the step the job asked for by their own flag
    // (--recompute, --sequence-parallel). After the cleanup, which would
    // merge recomputed copies back into the forward; before fusion, so the
    // copies fuse like the originals. No group switch turns them off.
    {PassGroup::StepRewrite, "RecomputePass", 1000},
    // After RecomputePass: a layer recomputed whole gathers again already.
    {PassGroup::StepRewrite, "SequenceRegatherPass", 1100},
    // GraphFusion: whole subgraphs into one op. Attention fuses on the
    // forward before autodiff too (the report counts those here).
    {PassGroup::GraphFusion, "FlashAttentionFusionPass", 50},
    {PassGroup::GraphFusion, "MatMulBiasAddFusionPass", 5120},
    // UBFusion: kernels. The rules of fusion_rules/ (4200-4290) run first.
    {PassGroup::UBFusion, "RmsNormFusionPass", 4291},
    {PassGroup::UBFusion, "SoftmaxFusionPass", 4292},
    {PassGroup::UBFusion, "TbeMatmulFixPipeFusionPass", 4295},
    {PassGroup::UBFusion, "ATbeMatmulElemwiseFusionPass", 4300},
    // The update's gradient scale and cast into the AdamW kernel, before the
    // eltwise pass would group the two on their own.
    {PassGroup::UBFusion, "AdamWPrologueFusionPass", 5930},
    {PassGroup::UBFusion, "TbeEltwiseFusionPass", 5940},
    // Last: the Casts every other pass left alone join their producer's kernel.
    {PassGroup::UBFusion, "CastFusionPass", 5950},
};

} // namespace

std::span<const PipelineEntry> builtinPipeline() { return kPipeline; }

int pipelinePriority(const PassInfo &info) {
  for (const PipelineEntry &e : kPipeline)
    if (e.pass == info.name)
      return e.priority;
  return info.priority;
}

} // namespace kiln::passes
