// Constant folding over splats.
//
// kiln has no tensor constants: constants are Fill nodes (one value, a dtype,
// a shape). A node whose inputs are all Fill outputs is folded into one Fill
// only when an explicit allow-list says its result is a splat:
//   - elementwise and broadcasting arithmetic: the value is the op's own
//     reference kernel run on one-element tensors, so it rounds exactly as
//     the kernel does;
//   - shape ops that only move data (Reshape, BroadcastTo, Transpose, Slice,
//     Split, Concat of equal splats, Pad with the splat's own value);
//   - reductions (ReduceSum, ReduceMean, SumToShape, Softmax), by running the
//     kernel on the whole materialised input when it is small, since the
//     value depends on how the kernel accumulates.
// The value is computed under each overflow mode in the options (the pass
// uses every mode of the target), and the fold is made only when every mode
// gives the same bits and the new Fill reproduces them.
#include "passes/cleanup/constant_folding.h"

#include <cmath>
#include <cstring>
#include <map>
#include <string>

#include "ops/op_registry.h"
#include "passes/pass_context.h"
#include "passes/pass_registry.h"

namespace kiln::passes {
namespace {

constexpr const char *kPassName = "ConstantFoldingPass";

enum class Rule { Compute, Move, Concat, Pad, Reduce };

const std::map<std::string, Rule, std::less<>> &allowList() {
  static const std::map<std::string, Rule, std::less<>> rules = {
      {"Add", Rule::Compute},       {"Sub", Rule::Compute},       {"Mul", Rule::Compute},
      {"Div", Rule::Compute},       {"BiasAdd", Rule::Compute},   {"AddN", Rule::Compute},
      {"Neg", Rule::Compute},       {"Exp", Rule::Compute},       {"Log", Rule::Compute},
      {"Sqrt", Rule::Compute},      {"Rsqrt", Rule::Compute},     {"RsqrtGrad", Rule::Compute},
      {"Sigmoid", Rule::Compute},   {"Silu", Rule::Compute},      {"SiluGrad", Rule::Compute},
      {"Cast", Rule::Compute},      {"Reshape", Rule::Move},      {"BroadcastTo", Rule::Move},
      {"Transpose", Rule::Move},    {"Slice", Rule::Move},        {"Split", Rule::Move},
      {"Concat", Rule::Concat},     {"Pad", Rule::Pad},           {"ReduceSum", Rule::Reduce},
      {"ReduceMean", Rule::Reduce}, {"SumToShape", Rule::Reduce}, {"Softmax", Rule::Reduce},
  };
  return rules;
}

std::string notAllowedReason(const std::string &op) {
  if (op == "RotateHalf")
    return "RotateHalf negates half of its input, so a splat does not stay a splat";
  if (op == "CausalMask")
    return "CausalMask masks elements by position, so a splat does not stay a splat";
  return op + " is not on the constant-folding allow-list (not known to keep a splat a splat)";
}

// Runs `op`'s reference kernel; outputs are allocated with `out_types`. The
// ops folded are built-in ones: only they can be on the allow-list.
Expected<std::vector<Tensor>> runKernel(const std::string &op, const std::string &node_name,
                                        OverflowMode mode, const std::vector<Tensor> &inputs,
                                        const std::vector<TensorType> &out_types,
                                        const AttrMap &attrs) {
  const ops::RegisteredOp *reg = ops::OpRegistry::builtin().find(op);
  if (!reg)
    return Error("unknown op '" + op + "'");
  ops::KernelContext kctx;
  kctx.overflow = mode;
  kctx.node_name = node_name;
  std::vector<const Tensor *> args;
  for (const Tensor &t : inputs)
    args.push_back(&t);
  std::vector<Tensor> outputs;
  for (const TensorType &t : out_types)
    outputs.emplace_back(t);
  KILN_RETURN_IF_ERROR(reg->impl.kernel(kctx, args, outputs, attrs));
  return outputs;
}

// Element `k` of `t` as a one-element tensor [1] (the bits unchanged).
Tensor elementOf(const Tensor &t, int64_t k) {
  Tensor e(TensorType{t.dtype(), {1}});
  const size_t size = dtypeSize(t.dtype());
  std::memcpy(e.data(), static_cast<const uint8_t *>(t.data()) + k * size, size);
  return e;
}

bool isSplatTensor(const Tensor &t) {
  const size_t size = dtypeSize(t.dtype());
  const auto *bytes = static_cast<const uint8_t *>(t.data());
  for (int64_t k = 1; k < t.numElements(); ++k)
    if (std::memcmp(bytes, bytes + k * size, size) != 0)
      return false;
  return true;
}

std::string describe(const Tensor &one) {
  return isFloat(one.dtype()) ? attrValueToString(static_cast<double>(one.getFloat(0)))
                              : std::to_string(one.getInt(0));
}

class Folder {
public:
  Folder(Graph &graph, const ConstantFoldingOptions &options) : graph_(graph), options_(options) {}

  // The splat value of `node`'s outputs under each mode, one-element tensors
  // of the output dtype, or why there is none.
  Expected<std::vector<Tensor>> evaluate(const Node &node) const {
    auto rule = allowList().find(node.op);
    if (rule == allowList().end())
      return Error(notAllowedReason(node.op));
    if (node.group != kNoGroup)
      return Error("it belongs to fusion group '" + graph_.group(node.group).name +
                   "', whose intermediates need not round as a Fill does");
    for (ValueId in : node.inputs) {
      const Node &fill = graph_.node(graph_.value(in).producer);
      if (fill.group != kNoGroup)
        return Error("its input '" + fill.name + "' belongs to fusion group '" +
                     graph_.group(fill.group).name + "'");
    }
    std::vector<Tensor> per_mode;
    for (OverflowMode mode : options_.modes) {
      KILN_ASSIGN_OR_RETURN(Tensor value, evaluateUnder(node, rule->second, mode));
      per_mode.push_back(std::move(value));
    }
    return per_mode;
  }

  // The Fill attributes that reproduce `per_mode` bit for bit under every mode.
  Expected<AttrMap> fillAttrs(const Node &node, const std::vector<Tensor> &per_mode) const {
    for (size_t m = 1; m < per_mode.size(); ++m)
      if (!(per_mode[m] == per_mode[0]))
        return Error("its result depends on the overflow mode (" + describe(per_mode[0]) +
                     " under " + std::string(overflowModeName(options_.modes[0])) + ", " +
                     describe(per_mode[m]) + " under " +
                     std::string(overflowModeName(options_.modes[m])) +
                     ") and passes do not know the job's mode");
    const Tensor &v = per_mode[0];
    const double value =
        isFloat(v.dtype()) ? static_cast<double>(v.getFloat(0)) : static_cast<double>(v.getInt(0));
    // ops::verifyGraph compares attributes with ==, so a NaN value would fail it.
    if (std::isnan(value))
      return Error("its result is NaN, which a Fill value cannot hold (NaN != NaN fails the "
                   "verifier's attribute check)");
    // Fill holds a double: integers past 2^53 do not survive the trip.
    constexpr double two63 = 9223372036854775808.0;
    if (!isFloat(v.dtype()) &&
        !(value >= -two63 && value < two63 && static_cast<int64_t>(value) == v.getInt(0)))
      return Error("its result " + describe(v) + " cannot be written as a Fill value");
    AttrMap attrs{{"value", value}, {"dtype", v.dtype()}, {"shape", Shape{}}};
    for (size_t m = 0; m < per_mode.size(); ++m) {
      auto fill = runKernel("Fill", node.name, options_.modes[m], {}, {v.type()}, attrs);
      if (!fill || !((*fill)[0] == v))
        return Error("its result " + describe(v) + " cannot be written as a Fill value");
    }
    return attrs;
  }

  // Rewrites `id` into Fills of `attrs` (with each output's shape).
  void rewrite(NodeId id, AttrMap attrs) {
    const Node node = graph_.node(id); // a copy: addNode below may move nodes
    Provenance provenance{kPassName, {node.name}};
    if (node.outputs.size() == 1) {
      Node &n = graph_.node(id);
      attrs.set("shape", graph_.type(n.outputs[0]).shape);
      n.op = "Fill";
      n.inputs.clear();
      n.attrs = std::move(attrs);
      n.provenance = std::move(provenance);
      return;
    }
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const TensorType type = graph_.type(node.outputs[k]);
      attrs.set("shape", type.shape);
      NodeId fill = graph_.addNode("Fill", freshName(node.name + "." + std::to_string(k)), {},
                                   {type}, attrs, provenance);
      graph_.replaceAllUses(node.outputs[k], graph_.node(fill).outputs[0]);
    }
    graph_.eraseNode(id);
  }

private:
  Expected<Tensor> materialise(ValueId v, Shape shape, OverflowMode mode) const {
    const Node &fill = graph_.node(graph_.value(v).producer);
    TensorType type{graph_.type(v).dtype, std::move(shape)};
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> out,
                          runKernel("Fill", fill.name, mode, {}, {type}, fill.attrs));
    return std::move(out[0]);
  }

  Expected<Tensor> evaluateUnder(const Node &node, Rule rule, OverflowMode mode) const {
    std::vector<Tensor> ones;
    for (ValueId in : node.inputs) {
      KILN_ASSIGN_OR_RETURN(Tensor t, materialise(in, {1}, mode));
      ones.push_back(std::move(t));
    }
    switch (rule) {
    case Rule::Compute: {
      // Every output element sees the same input values, so one element is all of them.
      std::vector<TensorType> types;
      for (ValueId out : node.outputs)
        types.push_back(TensorType{graph_.type(out).dtype, {1}});
      KILN_ASSIGN_OR_RETURN(std::vector<Tensor> out,
                            runKernel(node.op, node.name, mode, ones, types, node.attrs));
      return std::move(out[0]);
    }
    case Rule::Move:
      return ones[0];
    case Rule::Concat:
      for (size_t i = 1; i < ones.size(); ++i)
        if (!(ones[i] == ones[0]))
          return Error("it joins splats of different values (" + describe(ones[0]) + " and " +
                       describe(ones[i]) + ")");
      return ones[0];
    case Rule::Pad:
      return evaluatePad(node, mode);
    case Rule::Reduce:
      return evaluateReduce(node, mode);
    }
    return Error("unreachable");
  }

  // Pads a [1,...,1] splat by at most one element per side, as the node pads,
  // and asks whether padding and splat agree.
  Expected<Tensor> evaluatePad(const Node &node, OverflowMode mode) const {
    const TensorType &x = graph_.type(node.inputs[0]);
    if (x.numElements() == 0)
      return Error("its input is empty, so the result is padding only");
    Shape small(x.shape.size(), 1);
    std::vector<int64_t> before = node.attrs.getInts("before"), after = node.attrs.getInts("after");
    Shape out_shape = small;
    for (size_t a = 0; a < small.size(); ++a) {
      before[a] = std::min<int64_t>(before[a], 1);
      after[a] = std::min<int64_t>(after[a], 1);
      out_shape[a] += before[a] + after[a];
    }
    AttrMap attrs = node.attrs;
    attrs.set("before", before);
    attrs.set("after", after);
    KILN_ASSIGN_OR_RETURN(Tensor in, materialise(node.inputs[0], small, mode));
    KILN_ASSIGN_OR_RETURN(
        std::vector<Tensor> out,
        runKernel("Pad", node.name, mode, {in}, {TensorType{x.dtype, out_shape}}, attrs));
    if (!isSplatTensor(out[0]))
      return Error("it pads with " + attrValueToString(node.attrs.getFloat("value")) +
                   ", which differs from the splat " + describe(elementOf(in, 0)));
    return elementOf(out[0], 0);
  }

  Expected<Tensor> evaluateReduce(const Node &node, OverflowMode mode) const {
    std::vector<Tensor> inputs;
    for (ValueId in : node.inputs) {
      const TensorType &t = graph_.type(in);
      if (t.numElements() > options_.max_reduce_elements)
        return Error("it reduces " + std::to_string(t.numElements()) +
                     " elements; reductions are folded up to " +
                     std::to_string(options_.max_reduce_elements));
      KILN_ASSIGN_OR_RETURN(Tensor full, materialise(in, t.shape, mode));
      inputs.push_back(std::move(full));
    }
    std::vector<TensorType> types;
    for (ValueId out : node.outputs)
      types.push_back(graph_.type(out));
    if (types[0].numElements() == 0)
      return Error("its result is empty");
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> out,
                          runKernel(node.op, node.name, mode, inputs, types, node.attrs));
    if (!isSplatTensor(out[0]))
      return Error("its kernel's result is not a splat");
    return elementOf(out[0], 0);
  }

  std::string freshName(const std::string &base) const {
    std::string name = base;
    for (int i = 1; graph_.findNode(name) != kNoNode || graph_.findInput(name); ++i)
      name = base + "_" + std::to_string(i);
    return name;
  }

  Graph &graph_;
  const ConstantFoldingOptions &options_;
};

bool isSplatValue(const Graph &graph, ValueId v) {
  NodeId p = graph.value(v).producer;
  return p != kNoNode && !graph.isErased(p) && graph.node(p).op == "Fill";
}

} // namespace

PassResult foldConstants(Graph &graph, const ConstantFoldingOptions &options) {
  PassResult result;
  Folder folder(graph, options);
  // Folded nodes become Fills in place, so their users see splats later in the walk.
  const NodeId n = static_cast<NodeId>(graph.numNodes());
  for (NodeId id = 0; id < n; ++id) {
    if (graph.isErased(id))
      continue;
    const Node &node = graph.node(id);
    if (node.op == "Fill" || node.inputs.empty())
      continue;
    bool all_splats = true;
    for (ValueId in : node.inputs)
      all_splats = all_splats && isSplatValue(graph, in);
    if (!all_splats)
      continue;
    ++result.match_times;
    Expected<std::vector<Tensor>> value = folder.evaluate(node);
    Expected<AttrMap> attrs =
        value ? folder.fillAttrs(node, *value) : Expected<AttrMap>(value.error());
    if (!attrs) {
      result.reject(node, attrs.message());
      continue;
    }
    folder.rewrite(id, std::move(*attrs));
    ++result.effect_times;
  }
  result.statistics["nodes_folded"] = result.effect_times;
  return result;
}

const PassInfo &ConstantFoldingPass::info() const {
  static const PassInfo info{
      .name = kPassName,
      .group = PassGroup::Cleanup,
      .default_on = true,
      .may_disable = true,
      .summary = "Folds nodes whose inputs are all splats (Fill) into one Fill",
      .description =
          "Matches a node whose inputs are all Fill outputs and rewrites it in place into a Fill "
          "of its result when the result is provably a splat: elementwise and broadcasting "
          "arithmetic "
          "(the value is the op's reference kernel on one element), shape ops that only move data "
          "(Reshape, BroadcastTo, Transpose, Slice, Split, Concat of equal splats, Pad with the "
          "splat's value) and small reductions (the kernel on the whole input). The fold is made "
          "only when every overflow mode of the target gives the same bits. Nodes in fusion groups "
          "are left alone."};
  return info;
}

Expected<PassResult> ConstantFoldingPass::run(Graph &graph, const PassContext &ctx) const {
  // Every mode the target supports, not only the job's: a compiled graph
  // (kiln compile -o) does not record the mode it will run under.
  ConstantFoldingOptions options;
  options.modes = ctx.target().overflow_modes;
  return foldConstants(graph, options);
}

KILN_REGISTER_PASS(ConstantFoldingPass);

} // namespace kiln::passes
