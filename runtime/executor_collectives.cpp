// The executor's collective kernels across a tensor-parallel group (and
// ZeRO-3's gather), each rank's result in its own arena (executor.h runGroup).
#include <algorithm>
#include <cstring>
#include <utility>

#include "ir/float_status.h"
#include "runtime/executor.h"

namespace kiln::runtime {

// A collective kernel across the group, each rank's result in its own
// arena: TensorParallelReduce adds the ranks' inputs in rank order in f32
// and rounds the sum once, as the job's kernels round (with `groups`, each
// group of consecutive ranks its own sum); TensorParallelMax
// takes their max (exact); DataParallelGather writes into each rank the
// weight its replicas' slices make (ExecutorOptions::gather_weight);
// sequence parallelism's all-gather and reduce-scatter as
// runSequenceCollective says. TensorParallelCopy is an alias (runGroup).
Expected<uint32_t> Executor::runCollective(size_t index, std::vector<std::vector<Tensor> *> &group,
                                           const std::vector<std::shared_ptr<uint8_t[]>> &arenas) {
  const Node &node = graph_.node(kernels_.kernels[index].spec.members.front());
  const ValueId in = node.inputs[0], out = node.outputs[0];
  if (node.op == "DataParallelGather") {
    if (!options_.gather_weight)
      return Error("node '" + node.name + "': a ZeRO-3 gather runs only in kiln train --zero 3");
    for (size_t r = 0; r < group.size(); ++r) {
      KILN_ASSIGN_OR_RETURN(Tensor whole,
                            options_.gather_weight(graph_.valueName(in), static_cast<int>(r)));
      if (!(whole.type() == graph_.type(out)))
        return Error("node '" + node.name + "': the gathered weight is " +
                     typeToString(whole.type()) + ", the graph needs " +
                     typeToString(graph_.type(out)));
      Tensor &gathered = (*group[r])[out] = place(out, arenas[r]);
      copyBytes(gathered, whole);
    }
    return 0u;
  }
  const bool max = node.op == "TensorParallelMax";
  const bool gather = node.op == "TensorParallelAllGather";
  const bool scatter = node.op == "TensorParallelReduceScatter";
  if (!max && !gather && !scatter && node.op != "TensorParallelReduce")
    return Error("node '" + node.name + "': the runtime has no collective '" + node.op + "'");
  const int64_t ranks = node.attrs.getInt("ranks");
  if (ranks != static_cast<int64_t>(group.size()))
    return Error("node '" + node.name + "': the graph reduces over " + std::to_string(ranks) +
                 " tensor-parallel ranks, the run has " + std::to_string(group.size()));
  if (gather || scatter)
    return runSequenceCollective(node, group, arenas);
  // A reduce with groups sums each group of consecutive ranks on its own.
  const int64_t groups = node.attrs.has("groups") ? node.attrs.getInt("groups") : 1;
  const size_t size = group.size() / static_cast<size_t>(groups);
  const int64_t n = (*group[0])[in].numElements();
  uint32_t status = 0;
  for (size_t first = 0; first < group.size(); first += size) {
    std::vector<float> acc(static_cast<size_t>(n), 0.0f);
    for (size_t r = first; r < first + size; ++r) {
      const Tensor &x = (*group[r])[in];
      for (int64_t i = 0; i < n; ++i) {
        const float v = x.dtype() == DType::F32 ? x.dataAs<float>()[i] : x.getFloat(i);
        acc[i] = !max ? acc[i] + v : r == first ? v : std::max(acc[i], v);
      }
    }
    Tensor &y = (*group[first])[out] = place(out, arenas[first]);
    takeFloatStatus();
    for (int64_t i = 0; i < n; ++i)
      y.setFloat(i, acc[i], kernels_.overflow);
    status |= takeFloatStatus();
    for (size_t r = first + 1; r < first + size; ++r) {
      Tensor &mine = (*group[r])[out] = place(out, arenas[r]);
      copyBytes(mine, y);
    }
  }
  return status;
}

// Sequence parallelism's collectives, whose pieces lie along the node's
// `axis`: seen as [outer, ranks x piece, inner], rank r's piece is rows
// [r piece, (r+1) piece) of the middle axis. The all-gather copies each
// rank's x into every rank's y at its piece (exact); the reduce-scatter adds
// the ranks' x in rank order in f32, rounds once, and gives rank r its piece.
Expected<uint32_t>
Executor::runSequenceCollective(const Node &node, std::vector<std::vector<Tensor> *> &group,
                                const std::vector<std::shared_ptr<uint8_t[]>> &arenas) {
  const ValueId in = node.inputs[0], out = node.outputs[0];
  const bool gather = node.op == "TensorParallelAllGather";
  const Shape &whole = graph_.type(gather ? out : in).shape;
  const size_t axis = static_cast<size_t>(node.attrs.getInt("axis"));
  const int64_t ranks = static_cast<int64_t>(group.size());
  int64_t outer = 1, inner = 1;
  for (size_t a = 0; a < whole.size(); ++a)
    (a < axis ? outer : inner) *= a == axis ? 1 : whole[a];
  const int64_t piece = whole[axis] / ranks * inner; // elements of a piece in one outer row
  const int64_t row = whole[axis] * inner;           // elements of a whole outer row
  for (size_t r = 0; r < group.size(); ++r)
    (*group[r])[out] = place(out, arenas[r]);
  if (gather) {
    const size_t size = dtypeSize(graph_.type(out).dtype);
    for (int64_t r = 0; r < ranks; ++r) {
      const uint8_t *x = static_cast<const uint8_t *>(std::as_const((*group[r])[in]).data());
      for (int64_t d = 0; d < ranks; ++d) {
        uint8_t *y = static_cast<uint8_t *>((*group[d])[out].data());
        for (int64_t o = 0; o < outer; ++o)
          std::memcpy(y + (o * row + r * piece) * size, x + o * piece * size, piece * size);
      }
    }
    return 0u;
  }
  const int64_t n = outer * row;
  std::vector<float> acc(static_cast<size_t>(n), 0.0f);
  for (size_t r = 0; r < group.size(); ++r) {
    const Tensor &x = (*group[r])[in];
    for (int64_t i = 0; i < n; ++i)
      acc[i] += x.dtype() == DType::F32 ? x.dataAs<float>()[i] : x.getFloat(i);
  }
  takeFloatStatus();
  for (int64_t r = 0; r < ranks; ++r) {
    Tensor &y = (*group[r])[out];
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < piece; ++i)
        y.setFloat(o * piece + i, acc[o * row + r * piece + i], kernels_.overflow);
  }
  return takeFloatStatus();
}

} // namespace kiln::runtime
