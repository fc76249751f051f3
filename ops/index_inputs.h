// Index inputs checked before a graph runs: a graph input whose values reach
// an op as indices (Gather's rows, a loss's labels) must hold values in that
// op's range. The compiled kernels clamp an index as a memory-safety net and
// would run on with the wrong row; the reference kernels refuse it. Checking
// the input once, where it is bound, gives both paths the same error, with
// the position in the input the user wrote rather than inside the graph.
#pragma once

#include <string_view>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "support/error.h"

namespace kiln::ops {

// Follows `input` through the ops that only move values (Reshape, Slice,
// Transpose, BroadcastTo) and through an ONNX import's wrap of negative
// indices (Where(x < 0, x + n, x): then [-n, 0) count from the end too) to
// every op that reads it as indices, and checks
// each element that reaches one against that op's range: [0, rows) for
// Gather and EmbeddingGrad (unless skip_out_of_range), [-n, n) along
// GatherElements' axis of n, [0, classes) or ignore_index for the
// cross-entropy losses. One pass over the elements per
// such use. An error names `tensor_name`, the first bad value, its position
// in `value`, the valid range and the op's node. Elements no index op reads
// (a label the loss's shift drops) are not checked, as the reference does not.
Status checkIndexInput(const Graph &graph, const GraphInput &input, const Tensor &value,
                       std::string_view tensor_name);

} // namespace kiln::ops
