#include "compiler/codegen/target_check.h"

#include <cstdio>
#include <set>

#include "passes/fusion/flash_attention_fusion.h"
#include "passes/fusion/ub_budget.h"

namespace kiln::codegen {
namespace {

std::string kib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f KiB", static_cast<double>(bytes) / 1024.0);
  return text;
}

// Elements one evaluation of `e`'s reductions walks (the product of nested
// extents along the deepest chain).
int64_t reducedElements(const ExprRef &e, std::set<const Expr *> &seen) {
  if (!seen.insert(e.get()).second)
    return 1;
  int64_t inner = 1;
  for (const ExprRef &op : e->operands)
    inner = std::max(inner, reducedElements(op, seen));
  return e->kind == ExprKind::Reduce ? e->extent * inner : inner;
}

// Per row: every reduction result, plus the source row the reductions walk
// (held once, however many reductions read it).
int64_t residentRowBytes(const KernelProgram &program) {
  int64_t results = 0, source = 0;
  for (const Stage &stage : program.stages) {
    if (!stage.materialized)
      continue;
    int64_t row = 1;
    for (size_t d = program.outer_rank; d < stage.shape.size(); ++d)
      row *= stage.shape[d];
    std::set<const Expr *> seen;
    if (stage.held) { // the source row, rewritten where it lies
      source = std::max(source, row);
      continue;
    }
    results += row;
    source = std::max(source, reducedElements(stage.body, seen));
  }
  return 4 * (results + (results > 0 ? source : 0));
}

} // namespace

KernelDiagnostic describeKernel(const Graph &graph, const KernelSpec &kernel) {
  KernelDiagnostic d;
  d.kernel = kernel.name;
  d.kind = kernel.kind;
  d.formed_by = kernel.formed_by;
  for (NodeId n : kernel.members)
    d.members.push_back({graph.node(n).name, graph.node(n).op});
  return d;
}

std::vector<KernelDiagnostic> checkKernel(const passes::FusionView &view, const KernelSpec &kernel,
                                          const KernelBuild &build, const target::Target &target,
                                          KernelTiling &tiling) {
  const Graph &graph = view.graph();
  std::vector<KernelDiagnostic> found;
  auto fail = [&](const char *code, std::string constraint) {
    KernelDiagnostic d = describeKernel(graph, kernel);
    d.code = code;
    d.constraint = std::move(constraint);
    found.push_back(std::move(d));
  };

  std::set<DType> missing;
  for (NodeId n : kernel.members) {
    for (ValueId v : graph.node(n).inputs)
      if (!target.supports(graph.type(v).dtype))
        missing.insert(graph.type(v).dtype);
    for (ValueId v : graph.node(n).outputs)
      if (!target.supports(graph.type(v).dtype))
        missing.insert(graph.type(v).dtype);
  }
  for (DType d : missing)
    fail(kErrDType,
         "uses " + std::string(dtypeName(d)) + ", which " + target.name + " does not have");

  // CANN's fused attention, as FlashAttentionFusionPass checks it before it
  // fuses: here for one read from a graph file.
  for (NodeId n : kernel.members) {
    const Node &node = graph.node(n);
    if (node.op != passes::kFlashAttentionOp && node.op != "FlashAttentionScoreGrad")
      continue;
    if (!target.hasFusedOp(passes::kFlashAttentionOp))
      fail(kErrFusedOp, "'" + node.name + "' is a " + node.op + ", which " + target.name +
                            " does not have (CANN ships the fused attention for the Atlas A2 "
                            "series)");
    else if (passes::Verdict fit = passes::flashAttentionTilesFit(
                 target, graph.type(node.inputs[0]), ops::attentionLayoutOf(node.attrs));
             !fit)
      fail(kErrFusedOp, "'" + node.name + "': " + fit.reason());
  }

  // The UB: streamed tiles, plus the rows a fused row kernel holds. The tile
  // halves from the target's vector tile until the working set fits.
  tiling.resident_row_bytes = kernel.grouped ? residentRowBytes(build.program) : 0;
  int64_t tile = target.vector_tile_elements;
  passes::UbUsage usage = passes::ubUsage(view, kernel.members, tile);
  while (usage.bytes + tiling.resident_row_bytes > target.memory.ub_bytes &&
         tile / 2 >= kMinVectorTileElements) {
    tile /= 2;
    usage = passes::ubUsage(view, kernel.members, tile);
  }
  tiling.vector_tile_elements = tile;
  tiling.ub_bytes = usage.bytes + tiling.resident_row_bytes;
  if (tiling.ub_bytes > target.memory.ub_bytes)
    fail(kErrUbOverflow, "needs " + kib(tiling.ub_bytes) + " of UB (" + kib(usage.bytes) + " for " +
                             std::to_string(usage.inputs) + " inputs and " +
                             std::to_string(usage.outputs) + " outputs double-buffered and " +
                             std::to_string(usage.intermediates) + " intermediates in tiles of " +
                             std::to_string(tile) + " elements, " + kib(tiling.resident_row_bytes) +
                             " for rows held across a reduction), " + target.name + " has " +
                             kib(target.memory.ub_bytes));

  if (!build.gemm)
    return found;
  const Node &mm = graph.node(build.gemm->node);
  for (size_t i = 0; i < 2; ++i) {
    const DType d = graph.type(mm.inputs[i]).dtype;
    if (!target.cubeTakes(d))
      fail(kErrCubeDType, "matmul '" + mm.name + "' has " + std::string(dtypeName(d)) +
                              " operands; the cube unit of " + target.name +
                              " takes only what cube_input_dtypes lists (a precision mode such as "
                              "allow_fp32_to_fp16 lowers them)");
  }
  // The output tile: the largest power-of-two multiple of the cube tile that
  // fits half of L0C (double-buffered) in f32, no larger than the result.
  const int64_t l0c = target.memory.l0c_bytes;
  int64_t tm = target.cube_tile[0], tn = target.cube_tile[1];
  if (2 * tm * tn * 4 > l0c) {
    fail(kErrL0cOverflow, "the smallest matmul output tile (" + std::to_string(tm) + " x " +
                              std::to_string(tn) + " f32, double-buffered) needs " +
                              kib(2 * tm * tn * 4) + " of L0C, " + target.name + " has " +
                              kib(l0c));
  } else {
    while (tm < build.gemm->m && 2 * (2 * tm) * tn * 4 <= l0c)
      tm *= 2;
    while (tn < build.gemm->n && 2 * tm * (2 * tn) * 4 <= l0c)
      tn *= 2;
  }
  tiling.cube_out_tile = {tm, tn};
  tiling.l0c_bytes = 2 * tm * tn * 4;

  if (kernel.kind == "matmul_fixpipe") {
    if (!target.fixpipe.present)
      fail(kErrFixPipeEpilogue,
           "the kernel applies its epilogue in FixPipe, which " + target.name + " does not have");
    else
      for (NodeId n : kernel.members)
        if (n != build.gemm->node && graph.node(n).op != "Reshape" &&
            !target.fixpipeApplies(graph.node(n).op)) // a Reshape is a free view
          fail(kErrFixPipeEpilogue, "FixPipe of " + target.name + " cannot apply " +
                                        graph.node(n).op + " ('" + graph.node(n).name + "')");
  }
  return found;
}

} // namespace kiln::codegen
