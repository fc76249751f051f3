// Range checks of index inputs (index_inputs.h). Where an input reaches its
// index op through Reshape or Slice, the same ops run on the positions
// 0..n-1 of the input (an iota), so each element reaching the op carries the
// position it came from.
#include "ops/index_inputs.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "ops/ignore_index.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

// What an op accepts in the index operand it reads; nothing when it reads
// none (or, as a Gather that skips out-of-range rows, accepts any).
struct IndexRange {
  int64_t end = 0;               // values in [0, end)
  std::optional<int64_t> ignore; // also this one (a loss's ignore_index)
  std::string role;              // "the rows of the table", "the classes"
  bool from_end = false;         // and [-end, 0), counted from the end (GatherElements)
};

std::optional<IndexRange> indexRangeOf(const Graph &graph, const Node &node, size_t operand) {
  if (operand != 1)
    return std::nullopt;
  const bool skips = node.attrs.has("skip_out_of_range") && node.attrs.getBool("skip_out_of_range");
  if (node.op == "Gather" && !skips)
    return IndexRange{graph.type(node.inputs[0]).shape.at(0), std::nullopt,
                      "the rows of the table"};
  if (node.op == "GatherElements") {
    const Shape &x = graph.type(node.inputs[0]).shape;
    const int64_t rank = static_cast<int64_t>(x.size()), axis = node.attrs.getInt("axis");
    return IndexRange{x.at(axis < 0 ? axis + rank : axis), std::nullopt,
                      "the elements along the axis", true};
  }
  if (node.op == "EmbeddingGrad" && !skips)
    return IndexRange{node.attrs.getInt("num_rows"), std::nullopt, "the rows of the table"};
  if (node.op == "CrossEntropyLoss" || node.op == "CrossEntropyLossGrad")
    return IndexRange{graph.type(node.inputs[0]).shape.at(1), node.attrs.getInt("ignore_index"),
                      "the classes of the logits"};
  if (node.op == "VocabParallelCrossEntropy" || node.op == "VocabParallelCrossEntropyGrad") {
    const int64_t vocab = node.attrs.getInt("vocab"); // a padded vocabulary's true size
    return IndexRange{
        vocab > 0 ? vocab : graph.type(node.inputs[0]).shape.at(1) * node.attrs.getInt("ranks"),
        node.attrs.getInt("ignore_index"), "the classes of the whole vocabulary"};
  }
  return std::nullopt;
}

// Ops whose one input's elements reach the output unchanged, only moved.
bool onlyMovesValues(const Node &node) {
  return node.inputs.size() == 1 && node.outputs.size() == 1 &&
         (node.op == "Reshape" || node.op == "Slice" || node.op == "Transpose" ||
          node.op == "BroadcastTo");
}

// "[0, 2]": the index of flat position `pos` in `shape`.
std::string indexIn(const Shape &shape, int64_t pos) {
  std::vector<int64_t> index(shape.size());
  for (size_t axis = shape.size(); axis-- > 0;) {
    index[axis] = shape[axis] > 0 ? pos % shape[axis] : 0;
    pos = shape[axis] > 0 ? pos / shape[axis] : 0;
  }
  std::string text = "[";
  for (size_t i = 0; i < index.size(); ++i)
    text += (i ? ", " : "") + std::to_string(index[i]);
  return text + "]";
}

// `wrap` > 0: the value reaches the op through an ONNX import's wrap of
// negative indices (v < 0 ? v + wrap : v), so [-wrap, 0) counts from the end.
Status checkUse(const Node &node, const IndexRange &range, const Tensor &value,
                const Tensor &positions, int64_t wrap, std::string_view tensor_name) {
  const bool label = range.ignore.has_value();
  for (int64_t k = 0; k < positions.numElements(); ++k) {
    const int64_t pos = positions.getInt(k);
    const int64_t v = value.getInt(pos);
    const int64_t reaching =
        v < 0 && (wrap > 0 || range.from_end) ? v + (wrap > 0 ? wrap : range.end) : v;
    if ((reaching >= 0 && reaching < range.end) || (label && isIgnored(v, *range.ignore)))
      continue;
    const std::string lowest = std::to_string(range.from_end ? -range.end
                                              : wrap > 0     ? std::max(-wrap, -range.end)
                                                             : 0);
    return Error("tensor '" + std::string(tensor_name) + "': " + (label ? "label " : "index ") +
                 std::to_string(v) + " at position " + std::to_string(pos) + " (" +
                 indexIn(value.shape(), pos) + ") is outside [" + lowest + ", " +
                 std::to_string(range.end) + ")" + (label ? notIgnoredClause(*range.ignore) : "") +
                 ", " + range.role + " of " + node.op + " node '" + node.name + "'");
  }
  return Status::ok();
}

// The Fill constant `v` holds, if a Fill makes it.
std::optional<double> fillValue(const Graph &graph, ValueId v) {
  const NodeId producer = graph.value(v).producer;
  if (producer == kNoNode || graph.node(producer).op != "Fill")
    return std::nullopt;
  return graph.node(producer).attrs.getFloat("value");
}

// Whether `v` is made by `op` from `from` and a Fill: its constant.
std::optional<double> constantBeside(const Graph &graph, ValueId v, std::string_view op,
                                     ValueId from) {
  const NodeId producer = graph.value(v).producer;
  if (producer == kNoNode)
    return std::nullopt;
  const Node &node = graph.node(producer);
  if (node.op != op || node.inputs.size() != 2 || node.inputs[0] != from)
    return std::nullopt;
  return fillValue(graph, node.inputs[1]);
}

// Where(from < 0, from + n, from), as an ONNX import wraps run-time indices
// that count from the end (compiler/frontend/onnx): n; 0 for any other node.
int64_t wrapOf(const Graph &graph, const Node &node, ValueId from) {
  if (node.op != "Where" || node.inputs.size() != 3 || node.inputs[2] != from ||
      constantBeside(graph, node.inputs[0], "Less", from) != 0.0)
    return 0;
  const std::optional<double> n = constantBeside(graph, node.inputs[1], "Add", from);
  return n && *n > 0 ? static_cast<int64_t>(*n) : 0;
}

// The positions (0..n-1) of a tensor of `shape`.
Tensor iota(const Shape &shape) {
  Tensor t(TensorType{DType::I64, shape});
  auto *p = t.dataAs<int64_t>();
  for (int64_t k = 0; k < t.numElements(); ++k)
    p[k] = k;
  return t;
}

} // namespace

Status checkIndexInput(const Graph &graph, const GraphInput &input, const Tensor &value,
                       std::string_view tensor_name) {
  if (isFloat(value.dtype()) || value.dtype() == DType::Bool)
    return Status::ok();
  const std::vector<std::vector<NodeId>> users = graph.computeUsers();
  const OpRegistry &registry = opsOf(graph);
  // Each value on the way holds, per element, its position in the input;
  // and the wrap of negative indices it went through, if any.
  struct Pending {
    ValueId at;
    Tensor positions;
    int64_t wrap = 0;
  };
  std::vector<Pending> pending;
  pending.push_back({input.value, iota(value.shape())});
  while (!pending.empty()) {
    auto [at, positions, wrap] = std::move(pending.back());
    pending.pop_back();
    NodeId previous = kNoNode;
    for (NodeId id : users[at]) {
      if (id == previous) // a node reading the value twice is listed twice, side by side
        continue;
      previous = id;
      const Node &node = graph.node(id);
      for (size_t operand = 0; operand < node.inputs.size(); ++operand) {
        if (node.inputs[operand] != at)
          continue;
        if (auto range = indexRangeOf(graph, node, operand))
          KILN_RETURN_IF_ERROR(checkUse(node, *range, value, positions, wrap, tensor_name));
      }
      if (const int64_t n = wrapOf(graph, node, at);
          n > 0 && wrap == 0 && graph.type(node.outputs[0]).shape == graph.type(at).shape) {
        pending.push_back({node.outputs[0], positions, n});
        continue;
      }
      const RegisteredOp *op = registry.find(node.op);
      if (!onlyMovesValues(node) || !op)
        continue;
      std::vector<Tensor> moved{Tensor(TensorType{DType::I64, graph.type(node.outputs[0]).shape})};
      KernelContext ctx;
      ctx.node_name = node.name;
      KILN_RETURN_IF_ERROR(op->impl.kernel(ctx, {&positions}, moved, node.attrs));
      pending.push_back({node.outputs[0], std::move(moved[0]), wrap});
    }
  }
  return Status::ok();
}

} // namespace kiln::ops
