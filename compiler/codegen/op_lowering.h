// How each op becomes kernel expressions: one lowering per op, registered
// next to it in compiler/codegen/lowering/ with one line, as ops register
// their reference kernels:
//
//   KILN_REGISTER_LOWERING("Exp", lowerExp);
//
// A lowering returns, for each output of the node, the body of its element at
// output indices (var(0), ..., var(rank-1)), in the compute type of the
// output dtype (f32 for every float dtype) and NOT rounded to the output's
// storage dtype: the kernel builder rounds where the fused kernel's numerics
// say (kernel_builder.h). Cast is the exception: its rounding is its meaning.
// Intermediate rows an op reads back (softmax's row max and sum) are stages
// of their own, added with addStage().
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "compiler/codegen/kernel_expr.h"
#include "compiler/codegen/kernel_program.h"
#include "ir/graph.h"
#include "support/error.h"

namespace kiln::codegen {

class LowerContext {
public:
  // `input_buffers[i]` is the buffer holding the node's input i.
  LowerContext(const Node &node, std::vector<TensorType> input_types,
               std::vector<TensorType> output_types, std::vector<int> input_buffers,
               KernelProgram &program, int &next_rvar);

  const Node &node() const { return node_; }
  const AttrMap &attrs() const { return node_.attrs; }
  size_t numInputs() const { return input_types_.size(); }
  const TensorType &inputType(size_t i) const { return input_types_[i]; }
  const TensorType &outputType(size_t k) const { return output_types_[k]; }

  // Input i at `indices` (one per axis of the input), in its compute type.
  ExprRef input(size_t i, std::vector<ExprRef> indices) const;
  // Input i read under numpy broadcasting against an output of `out_shape`
  // indexed by `out_indices` (var(0..) by default).
  ExprRef broadcastInput(size_t i, const Shape &out_shape) const;
  ExprRef broadcastInput(size_t i, const Shape &out_shape,
                         const std::vector<ExprRef> &out_indices) const;
  // var(0), ..., var(rank - 1).
  static std::vector<ExprRef> vars(size_t rank);

  // A fresh reduction variable id for reduce()/rvar().
  int newReduceVar() { return next_rvar_++; }
  // Adds an intermediate stage of this op and returns its buffer id; read it
  // with read(). Its body's var(d) are the stage's own indices.
  int addStage(const std::string &label, Shape shape, ScalarType type, ExprRef body,
               bool held = false);
  ExprRef read(int buffer, std::vector<ExprRef> indices) const;

  // Makes the kernel call library routine `symbol` (kernels/library_kernels.h) with
  // `args` for its rows; the bodies the lowering returns still describe it.
  void callLibrary(std::string symbol, std::vector<int64_t> args);
  // The same, for a routine with several outputs, some of which the kernel
  // may not store: args[pos] of each (pos, k) of `outputs` becomes output
  // k's buffer slot, or -1 (KernelProgram::library_outputs); the routine's
  // rows span the outputs' first `rows_rank` axes.
  void callLibrary(std::string symbol, std::vector<int64_t> args,
                   std::vector<std::pair<size_t, size_t>> outputs, int rows_rank);
  // The buffer slot of the node's input i, and of output k once stored.
  int inputBuffer(size_t i) const { return input_buffers_[i]; }
  int outputSlot(size_t k) const { return static_cast<int>(program_.inputs.size() + k); }

  // A lowering failure naming the node: "node 'x' (Softmax): <message>".
  Error error(const std::string &message) const;

private:
  const Node &node_;
  std::vector<TensorType> input_types_;
  std::vector<TensorType> output_types_;
  std::vector<int> input_buffers_;
  KernelProgram &program_;
  int &next_rvar_;
};

// One body per output of the node.
using LowerFn = std::function<Expected<std::vector<ExprRef>>(LowerContext &ctx)>;

// The lowering of `op`, or null when the op has none.
const LowerFn *findLowering(std::string_view op);
std::vector<std::string> loweredOps();
bool registerLowering(const char *op, LowerFn fn);

} // namespace kiln::codegen

#define KILN_REGISTER_LOWERING(OP, FN)                                                             \
  [[maybe_unused]] static const bool KILN_CONCAT(kiln_lowering_registered_, __LINE__) =            \
      ::kiln::codegen::registerLowering(OP, FN)
