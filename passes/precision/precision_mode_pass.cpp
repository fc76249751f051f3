// PrecisionModePass: applies the job's precision_mode to the graph, with
// TensorFlow AMP's painting for the mixed modes: white-list ops (matmuls)
// compute in the low dtype, black-list ops (reductions, softmax, exp/log,
// losses, the optimizer) in f32, gray ops follow their producers (low only
// when every float input is low; a linear layer's bias add in its matmul's
// dtype), and Fill constants follow their users.
// Nodes named in keep_dtype keep their dtype. Casts go where dtypes meet.
#include "passes/pass.h"
#include "passes/pass_context.h"
#include "passes/pass_registry.h"
#include "passes/precision/retype.h"

namespace kiln::passes {
namespace {

constexpr const char *kPassName = "PrecisionModePass";

bool hasFloatOutput(const Graph &g, const Node &n) {
  for (ValueId v : n.outputs)
    if (isFloat(g.type(v).dtype))
      return true;
  return false;
}

// A linear layer's bias add: BiasAdd or Add of a white-list op's output and
// a parameter of the output's last extent, in the white op's low dtype. MindFormers'
// Linear casts its bias to the compute dtype and PyTorch's autocast runs
// linear's bias in it, so neither lifts the layer's output (and attention
// after a biased qkv projection) to f32 as a gray op with an f32 input
// would.
bool isLowBiasAdd(const Graph &g, const Node &n, const PrecisionSettings &p,
                  const std::vector<DType> &planned, DType low,
                  const std::vector<bool> &parameter) {
  if ((n.op != "BiasAdd" && n.op != "Add") || n.inputs.size() != 2)
    return false;
  for (int i = 0; i < 2; ++i) {
    const ValueId x = n.inputs[i], bias = n.inputs[1 - i];
    const NodeId producer = g.value(x).producer;
    const Shape &xs = g.type(x).shape, &bs = g.type(bias).shape;
    if (producer != kNoNode && planned[x] == low &&
        p.mixlist.listOf(g.node(producer).op) == PrecisionList::White && parameter[bias] &&
        bs.size() == 1 && !xs.empty() && bs[0] == xs.back())
      return true;
  }
  return false;
}

// The constants a gray op's dtype does not follow: Fill's outputs (which
// then take their users' dtype) and the rotary tables, RotaryCosSin's
// outputs and what is computed from them alone, in graph order. The tables
// lie in [-1, 1], so casting them to the low dtype (as Hugging Face casts
// its tables to the activations' dtype) cannot overflow; other constants
// (a mask of -inf or f32's lowest) would, and keep their users in f32.
std::vector<bool> constantValues(const Graph &g) {
  std::vector<bool> constant(g.numValues(), false), table(g.numValues(), false);
  for (NodeId id = 0; id < static_cast<NodeId>(g.numNodes()); ++id) {
    const Node &n = g.node(id);
    bool from_tables = n.op == "RotaryCosSin";
    if (!from_tables && !n.inputs.empty()) {
      from_tables = true;
      for (ValueId in : n.inputs)
        from_tables = from_tables && table[in];
    }
    for (ValueId out : n.outputs) {
      table[out] = from_tables;
      constant[out] = from_tables || n.op == "Fill";
    }
  }
  return constant;
}

// The values that are parameters (graph inputs of role Parameter).
std::vector<bool> parameterValues(const Graph &g) {
  std::vector<bool> parameter(g.numValues(), false);
  for (const GraphInput &in : g.inputs())
    parameter[in.value] = in.role == InputRole::Parameter;
  return parameter;
}

// Fill constants take their users' dtype when the users agree.
void constantsFollowUsers(const Graph &graph, const PrecisionSettings &p, RetypePlan &plan) {
  const std::vector<std::vector<NodeId>> users = graph.computeUsers();
  for (NodeId id = 0; id < static_cast<NodeId>(graph.numNodes()); ++id) {
    const Node &node = graph.node(id);
    if (node.op != "Fill" || !isFloat(graph.type(node.outputs[0]).dtype) ||
        p.keep_dtype.keeps(node))
      continue;
    std::optional<DType> common;
    bool agree = true;
    for (NodeId u : users[node.outputs[0]]) {
      const Node &user = graph.node(u);
      DType d = plan[u].dtype ? *plan[u].dtype : graph.type(user.outputs[0]).dtype;
      if (user.op == "Cast" || (common && *common != d))
        agree = false;
      common = d;
    }
    if (agree && common)
      plan[id] = {*common, {}, "constant: follows its users"};
  }
}

class PrecisionModePass : public Pass {
public:
  const PassInfo &info() const override {
    static const PassInfo info{
        .name = kPassName,
        .group = PassGroup::Precision,
        .default_on = true,
        .may_disable = false,
        .required_because =
            "it applies the job's precision_mode; without it the graph would not compute in the "
            "dtypes the job asked for (--precision-mode must_keep_origin_dtype keeps the model's "
            "own dtypes)",
        .summary = "Applies the job's precision_mode (force_fp32, force_fp16, allow_fp32_to_fp16, "
                   "must_keep_origin_dtype, allow_mix_precision, allow_mix_precision_bf16, "
                   "force_lowerprecision)",
        .description =
            "force_fp32 (= cube_fp16in_fp32out): every float op in f32, except that matmuls on "
            "a cube without f32 inputs (ascend910) take f16 and store f32. force_fp16: every "
            "float op in f16. force_lowerprecision: every f32 op in bf16 on a chip with bf16, in "
            "f16 "
            "on one without (ascend910); f16 and bf16 ops keep their dtype. allow_fp32_to_fp16: "
            "ops keep f32 where the chip computes it; "
            "matmuls on a cube without f32 go to f16. "
            "must_keep_origin_dtype: nothing changes. allow_mix_precision(_bf16): TensorFlow "
            "AMP's painting in graph order with f16 (bf16) as the low dtype: white-list ops low, "
            "black-list ops f32, gray ops low only when every float input is low (a linear layer's "
            "bias add after a white-list matmul in its low dtype, the bias cast, as MindFormers' "
            "Linear and PyTorch's autocast do; the rotary tables count as constants), Fill "
            "constants "
            "the dtype of their users when these agree. The lists are the built-in ones edited "
            "by --modify-mixlist; nodes named in --keep-dtype (by name or OpType::X) keep their "
            "dtype. Graph inputs and outputs keep their types, so parameters and optimizer state "
            "stay what the model made them (f32 master weights for an f32 model); Cast nodes "
            "are inserted where dtypes meet, one per value and dtype."};
    return info;
  }

  Expected<PassResult> run(Graph &graph, const PassContext &ctx) const override {
    const PrecisionSettings &p = ctx.precision();
    PassResult result;
    if (p.mode == PrecisionMode::MustKeepOriginDType)
      return result;
    const std::optional<DType> low = lowDType(p.mode);
    RetypePlan plan(graph.numNodes());
    // The dtype each value will hold once the plan is applied.
    std::vector<DType> planned(graph.numValues());
    for (size_t v = 0; v < graph.numValues(); ++v)
      planned[v] = graph.type(static_cast<ValueId>(v)).dtype;
    const std::vector<bool> constant = constantValues(graph), parameter = parameterValues(graph);

    for (NodeId id = 0; id < static_cast<NodeId>(graph.numNodes()); ++id) {
      const Node &node = graph.node(id);
      if (node.op == "Cast" || !hasFloatOutput(graph, node))
        continue;
      ++result.match_times;
      if (p.keep_dtype.keeps(node)) {
        const DType d = graph.type(node.outputs[0]).dtype;
        result.dtype_decisions.push_back({node.name, d, d, "keep_dtype"});
        continue;
      }
      const PrecisionList list = p.mixlist.listOf(node.op);
      NodeRetype &r = plan[id];
      switch (p.mode) {
      case PrecisionMode::ForceFp32:
        // A cube that cannot take f32 computes f16 in, f32 out (CANN's
        // cube_fp16in_fp32out, which is what force_fp32 means there).
        if (list == PrecisionList::White && !ctx.target().cubeTakes(DType::F32))
          r = {DType::F16, AttrMap{{"fp32_out", true}}, "force_fp32: cube_fp16in_fp32out"};
        else
          r = {DType::F32, {}, "force_fp32"};
        break;
      case PrecisionMode::ForceFp16:
        r = {DType::F16, {}, "force_fp16"};
        break;
      case PrecisionMode::ForceLowerPrecision:
        // CANN: an f32 op takes bf16 where it can, else f16; f16 and bf16 ops stay.
        if (graph.type(node.outputs[0]).dtype == DType::F32)
          r = {ctx.target().supports(DType::BF16) ? DType::BF16 : DType::F16,
               {},
               "force_lowerprecision"};
        break;
      case PrecisionMode::AllowFp32ToFp16:
        // Ops that can compute in f32 keep it; a cube without f32 goes f16.
        if (list == PrecisionList::White && !ctx.target().cubeTakes(DType::F32))
          r = {DType::F16, {}, "allow_fp32_to_fp16: the cube has no f32"};
        break;
      default:
        if (list == PrecisionList::White) {
          r = {*low, {}, "white list"};
        } else if (list == PrecisionList::Black) {
          r = {DType::F32, {}, "black list"};
        } else if (isLowBiasAdd(graph, node, p, planned, *low, parameter)) {
          r = {*low, {}, "gray list: a linear layer's bias, in its matmul's dtype"};
        } else {
          // Gray: low only when every float input (constants aside) is low.
          bool any_float = false, all_low = true;
          for (ValueId in : node.inputs) {
            if (!isFloat(planned[in]) || constant[in])
              continue;
            any_float = true;
            all_low = all_low && planned[in] == *low;
          }
          if (any_float)
            r = {all_low ? *low : DType::F32, {}, "gray list: follows its inputs"};
        }
      }
      if (r.dtype)
        for (ValueId v : node.outputs)
          if (isFloat(planned[v]))
            planned[v] = *r.dtype;
    }

    constantsFollowUsers(graph, p, plan);

    KILN_ASSIGN_OR_RETURN(std::vector<DTypeDecision> decisions,
                          applyRetype(graph, plan, kPassName));
    result.effect_times = static_cast<int64_t>(decisions.size());
    result.dtype_decisions.insert(result.dtype_decisions.end(), decisions.begin(), decisions.end());
    return result;
  }
};

KILN_REGISTER_PASS(PrecisionModePass);

} // namespace
} // namespace kiln::passes
