#include "compiler/codegen/kernel_builder.h"

#include <unordered_map>

#include "compiler/codegen/lowering/custom_ops.h"
#include "compiler/codegen/op_lowering.h"
#include "ops/op_registry.h"

namespace kiln::codegen {
namespace {

bool isMatMul(const Node &node) { return node.op == "MatMul" || node.op == "BatchMatMul"; }

Expected<GemmPlan> planGemm(const Graph &graph, const KernelSpec &kernel, NodeId id) {
  const Node &node = graph.node(id);
  GemmPlan plan;
  plan.node = id;
  plan.transpose_a = node.attrs.getBool("transpose_a");
  plan.transpose_b = node.attrs.getBool("transpose_b");
  auto indexOf = [&](ValueId v) {
    for (size_t i = 0; i < kernel.inputs.size(); ++i)
      if (kernel.inputs[i] == v)
        return static_cast<int>(i);
    return -1;
  };
  plan.a_input = indexOf(node.inputs[0]);
  plan.b_input = indexOf(node.inputs[1]);
  if (plan.a_input < 0 || plan.b_input < 0)
    return Error("node '" + node.name + "' (" + node.op +
                 "): its operands must come from outside the kernel");
  const Shape &a = graph.type(node.inputs[0]).shape;
  const Shape &c = graph.type(node.outputs[0]).shape;
  const size_t r = c.size();
  if (r < 2 || a.size() != r)
    return Error("node '" + node.name + "': matmul operands must have the output's rank");
  plan.m = c[r - 2];
  plan.n = c[r - 1];
  plan.k = plan.transpose_a ? a[r - 2] : a[r - 1];
  for (size_t d = 0; d + 2 < r; ++d)
    plan.batch *= c[d];
  return plan;
}

// The Reshape through which alone the kernel reads a single matmul's [m, n]
// result when it only splits the rows (to [..., n], the leading extents m
// in all: a linear layer's output unflattened to [batch, seq, n]), or
// kNoNode. The accumulator is then declared in that shape: the kernel's rows
// are the GEMM's rows, each row's epilogue reads its own row of the
// accumulator, and the runtime may run it on each thread's rows as their
// GEMM block finishes. Read through the Reshape's index arithmetic instead,
// the rows would not line up and the epilogue would run as one row.
NodeId rowSplittingReshape(const Graph &graph, const KernelSpec &kernel, const GemmPlan &plan) {
  const ValueId product = graph.node(plan.node).outputs[0];
  if (plan.batch != 1 || graph.type(product).shape.size() != 2)
    return kNoNode;
  for (ValueId out : kernel.outputs)
    if (out == product)
      return kNoNode;
  NodeId reshape = kNoNode;
  for (NodeId id : kernel.members)
    for (ValueId in : graph.node(id).inputs)
      if (in == product) {
        if (reshape != kNoNode || graph.node(id).op != "Reshape")
          return kNoNode;
        reshape = id;
      }
  if (reshape == kNoNode)
    return kNoNode;
  const Shape &to = graph.type(graph.node(reshape).outputs[0]).shape;
  if (to.size() < 2 || to.back() != plan.n)
    return kNoNode;
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < to.size(); ++d)
    rows *= to[d];
  return rows == plan.m ? reshape : kNoNode;
}

} // namespace

Expected<KernelBuild> buildKernel(const Graph &graph, const KernelSpec &kernel) {
  KernelBuild build;
  KernelProgram &program = build.program;
  std::unordered_map<ValueId, int> buffer_of;
  NodeId row_view = kNoNode; // rowSplittingReshape's
  for (size_t i = 0; i < kernel.inputs.size(); ++i) {
    program.inputs.push_back(graph.type(kernel.inputs[i]));
    buffer_of[kernel.inputs[i]] = static_cast<int>(i);
  }
  for (NodeId id : kernel.members) {
    if (!isMatMul(graph.node(id)))
      continue;
    if (build.gemm)
      return Error("kernel '" + kernel.name + "' holds two matmuls ('" +
                   graph.node(build.gemm->node).name + "' and '" + graph.node(id).name +
                   "'); a kernel drives one GEMM");
    KILN_ASSIGN_OR_RETURN(GemmPlan plan, planGemm(graph, kernel, id));
    build.gemm = plan;
    row_view = rowSplittingReshape(graph, kernel, plan);
    program.accumulator = static_cast<int>(program.inputs.size());
    program.inputs.push_back(TensorType{
        DType::F32, graph.type(graph.node(row_view == kNoNode ? id : row_view).outputs[0]).shape});
  }

  const bool round_each = !kernel.grouped || kernel.intermediates == Intermediates::Storage;
  int next_rvar = 0;
  for (NodeId id : kernel.members) {
    const Node &node = graph.node(id);
    if (id == row_view) { // the matmul's stage has its shape already
      buffer_of[node.outputs[0]] = buffer_of.at(node.inputs[0]);
      continue;
    }
    std::vector<TensorType> in_types, out_types;
    std::vector<int> in_buffers;
    for (ValueId v : node.inputs) {
      in_types.push_back(graph.type(v));
      in_buffers.push_back(buffer_of.at(v));
    }
    for (ValueId v : node.outputs)
      out_types.push_back(graph.type(v));

    std::vector<ExprRef> bodies;
    if (isMatMul(node)) {
      // The epilogue part of the matmul: the accumulator, plus the bias in f32.
      if (row_view != kNoNode)
        out_types[0].shape = program.inputs[program.accumulator].shape;
      const Shape &shape = out_types[0].shape;
      const int acc = static_cast<int>(program.inputs.size()) - 1;
      ExprRef body = load(acc, ScalarType::F32, LowerContext::vars(shape.size()));
      if (node.inputs.size() > 2)
        body =
            body + load(in_buffers[2], ScalarType::F32, {var(static_cast<int>(shape.size()) - 1)});
      bodies.push_back(body);
    } else {
      const LowerFn *lower = findLowering(node.op);
      const ops::RegisteredOp *op = lower ? nullptr : ops::opsOf(graph).find(node.op);
      if (!lower && !(op && op->impl.compute))
        return Error("node '" + node.name + "': op " + node.op +
                     " has no kernel lowering (compiler/codegen/lowering/)");
      LowerContext ctx(node, in_types, out_types, in_buffers, program, next_rvar);
      KILN_ASSIGN_OR_RETURN(bodies, lower ? (*lower)(ctx) : lowerCustomOp(ctx, *op->impl.compute));
      if (bodies.size() != node.outputs.size())
        return Error("node '" + node.name + "': the lowering of " + node.op + " gave " +
                     std::to_string(bodies.size()) + " results for " +
                     std::to_string(node.outputs.size()) + " outputs");
    }
    for (size_t k = 0; k < bodies.size(); ++k) {
      ExprRef body = bodies[k];
      const TensorType &type = out_types[k];
      if (body->type != scalarTypeOf(type.dtype))
        return Error("node '" + node.name + "': the lowering of " + node.op + " computes " +
                     std::string(scalarTypeName(body->type)) + " for a " +
                     std::string(dtypeName(type.dtype)) + " output");
      if (round_each && isFloat(type.dtype))
        body = round(body, type.dtype);
      program.stages.push_back(Stage{node.name, type.shape, body->type, body, false});
      buffer_of[node.outputs[k]] = program.stageBuffer(static_cast<int>(program.stages.size()) - 1);
    }
  }
  for (ValueId v : kernel.outputs)
    program.outputs.push_back(StoredOutput{
        buffer_of.at(v) - static_cast<int>(program.inputs.size()), graph.type(v).dtype});
  KILN_RETURN_IF_ERROR(planRows(program));
  if (!program.library.empty()) {
    if (kernel.members.size() != 1)
      return Error("kernel '" + kernel.name + "': " + graph.node(kernel.members.front()).op +
                   " runs as the library routine " + program.library +
                   " and cannot be fused with other ops");
    // The routine's rows are its outputs' first axes.
    program.outer_rank = program.library_rows_rank;
    const Node &node = graph.node(kernel.members.front());
    for (const auto &[pos, k] : program.library_outputs) {
      const int stage = buffer_of.at(node.outputs[k]) - static_cast<int>(program.inputs.size());
      program.library_args[pos] = -1;
      for (size_t o = 0; o < program.outputs.size(); ++o)
        if (program.outputs[o].stage == stage)
          program.library_args[pos] = static_cast<int64_t>(program.inputs.size() + o);
    }
  }
  return build;
}

} // namespace kiln::codegen
