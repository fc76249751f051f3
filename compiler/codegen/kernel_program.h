// A kernel program: the kernel's inputs, its stages (kernel_expr.h) and which
// stages it stores. Buffer ids in Load are: inputs [0, inputs.size()), then
// stage s at inputs.size() + s.
//
// Execution is row-blocked: the first `outer_rank` axes of every stored and
// materialised stage are the kernel's rows (the same extents everywhere), and
// each row is computed on its own: the materialised stages' rows into scratch
// memory, then the stored stages' rows. Rows run in parallel tiles.
//
// An output that sums over the rows (a weight or bias gradient summed over
// the tokens) would leave a kernel no row axis of its own, so one thread
// would compute it all. Where every row of a kernel would be one, such an
// output becomes a *row sum*: a stage of shape [row axes..., the output's
// axes...] holds its summand at each row, every tile of rows adds its rows'
// summands, in row order, into f32 partial sums in the output's buffer slot
// (one [output elements] f32 array per tile, zeroed by the runner), and the
// runner adds the tiles' partials in tile order and rounds them into the
// output. Tiles are fixed by the row count, not by the threads, so the sums
// are the same bits on every run and any number of threads.
#pragma once

#include <string>
#include <vector>

#include "compiler/codegen/kernel_expr.h"
#include "ir/shape.h"
#include "support/error.h"

namespace kiln::codegen {

struct Stage {
  std::string name; // for dumps: "%3" or the op's own label ("softmax.max")
  Shape shape;
  ScalarType type = ScalarType::F32;
  ExprRef body;
  bool materialized = false; // computed into scratch (it contains a reduction, or is held)
  // The lowering keeps it in scratch: a row's values computed once and read
  // by several stages (softmax's exp(x - max), read by its sum and its output).
  bool held = false;
};

struct StoredOutput {
  int stage = 0;
  DType dtype = DType::F32; // storage dtype of the kernel output
  // A row sum (see above): the stage of its summand at each row, else -1.
  int row_sum_stage = -1;

  // The stage whose rows the kernel walks for this output.
  int rowStage() const { return row_sum_stage >= 0 ? row_sum_stage : stage; }
};

struct KernelProgram {
  std::vector<TensorType> inputs;
  std::vector<Stage> stages;
  std::vector<StoredOutput> outputs;
  int outer_rank = 0; // set by planRows()
  // The input a GEMM writes (kernel_builder.h), or -1. Its rows are the
  // kernel's rows when planRows() can make them so: then each tile's GEMM
  // result is consumed while it is hot (the input is read only within the
  // row being computed).
  int accumulator = -1;
  // A library kernel (kernels/library_kernels.h): the generated function hands its
  // rows to this host routine, with `library_args`, instead of computing the
  // stages, which then only say what it computes (for dumps and checks).
  // For the ops whose loop form would do far more work than the routine
  // (a scatter-add written as a gather).
  std::string library;
  std::vector<int64_t> library_args;
  // Arguments that name one of the node's outputs: (index into library_args,
  // output k). The kernel builder writes the buffer slot the output is stored
  // in there, or -1 when nothing reads it and the kernel does not store it.
  std::vector<std::pair<size_t, size_t>> library_outputs;
  // How many leading axes of the outputs the routine's rows span (1: batches).
  int library_rows_rank = 1;

  int stageBuffer(int stage) const { return static_cast<int>(inputs.size()) + stage; }
  bool isInput(int buffer) const { return buffer < static_cast<int>(inputs.size()); }
  const Stage &stageOf(int buffer) const { return stages[buffer - inputs.size()]; }

  // Rows: the product of the first outer_rank axes of the stored stages.
  int64_t rows() const;
  // Whether any output is a row sum.
  bool hasRowSums() const;
  // f32 elements of scratch one row needs (all materialised stages' row parts).
  int64_t scratchElementsPerRow() const;
  // Offset of materialised stage `stage` in a row's scratch, in elements.
  int64_t scratchOffset(int stage) const;
  // The accumulator's rows are the kernel's rows (outer_rank is all its axes but the last).
  bool accumulatorIsRowLocal() const;
  // The one stored output is the GEMM's f32 result as it is (a lone matmul
  // without bias): the epilogue would only copy it and check it for inf and
  // NaN, which the runtime can do on the result itself.
  bool storesAccumulatorAsIs() const;
};

// Marks the stages that must be materialised and chooses the largest
// outer_rank for which every read of a materialised stage stays in its row;
// where that leaves one row, makes the outputs that are sums (nests of Sum
// reductions) row sums when that gives more rows.
// Errors when the program is malformed (a load of a later stage, an index
// count that does not match the buffer's rank).
Status planRows(KernelProgram &program);

// Text of the whole program, for --dump and tests.
std::string programToString(const KernelProgram &program);

// The ranges of the innermost axis of a row of `shape` between the points
// where an index of `program` wraps around it or is compared with a
// constant (kernel_expr.h's rangeSplits): the emitter runs one loop per
// range. One range when there is none (or the row has no inner axis: then
// empty).
std::vector<AxisRange> innerRanges(const KernelProgram &program, const Shape &shape);

} // namespace kiln::codegen
