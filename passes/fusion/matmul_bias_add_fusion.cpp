// MatMulBiasAddFusionPass (CANN GraphFusion, priority 5120): folds a
// BiasAdd, or an Add of a 1-D tensor, that follows a MatMul into the MatMul's
// optional bias input, which the cube adds in f32 before the result is
// rounded. CANN's conditions: the matmul result is 2-D, the bias is 1-D with
// the length of the result's last dimension and has the result's dtype, and
// the add is the matmul's only user.
//
//   c = MatMul(a, b); y = BiasAdd(c, bias); users(y)   =>   c = MatMul(a, b, bias); users(c)
//
// A graph rewrite, not a group: the MatMul keeps its name and records both
// nodes as its origins; the add is erased.
#include <algorithm>
#include <string>
#include <vector>

#include "passes/fusion/fusion_group_util.h"
#include "passes/fusion/matmul_epilogue.h"
#include "passes/pass_context.h"
#include "passes/pass_registry.h"

namespace kiln::passes {
namespace {

constexpr const char *kPassName = "MatMulBiasAddFusionPass";

// The add that reads `mm`'s result and the bias operand, or why there is none.
struct BiasUse {
  NodeId add = kNoNode;
  ValueId bias = kNoValue;
  std::string why_not;
};

BiasUse findBiasUse(const FusionView &view, const Node &mm) {
  const Graph &graph = view.graph();
  const ValueId c = mm.outputs[0];
  const std::string what = describeNode(mm);
  if (mm.inputs.size() > 2)
    return {kNoNode, kNoValue, what + " already has a bias input"};
  if (view.isGraphOutput(c))
    return {kNoNode, kNoValue,
            what + " is a graph output; folding the add would change that output"};
  const std::vector<NodeId> users = distinctUsers(view, c);
  if (users.empty())
    return {kNoNode, kNoValue, what + " has no users"};
  if (users.size() > 1)
    return {kNoNode, kNoValue,
            what + " has " + describeUsers(graph, users) +
                "; the bias folds only when an add is the matmul's only user"};
  const Node &add = graph.node(users[0]);
  if (add.op != "BiasAdd" && add.op != "Add")
    return {kNoNode, kNoValue,
            what + " is followed by " + describeNode(add) + ", not by BiasAdd or Add"};
  if (Verdict grouped = checkUngrouped(graph, {users[0]}); !grouped)
    return {kNoNode, kNoValue, grouped.reason()};
  // BiasAdd's bias is its second input; Add's may be either.
  const bool first = add.inputs[0] == c, second = add.inputs[1] == c;
  if (first && second)
    return {kNoNode, kNoValue, describeNode(add) + " adds the result to itself; no bias to fold"};
  if (add.op == "BiasAdd" && !first)
    return {kNoNode, kNoValue, describeNode(add) + " uses the matmul result as its bias"};
  return {users[0], first ? add.inputs[1] : add.inputs[0], {}};
}

// Allows when `bias` may become `mm`'s bias input (CANN's conditions).
Verdict checkBias(const Graph &graph, const Node &mm, const Node &add, ValueId bias) {
  const TensorType &c = graph.type(mm.outputs[0]);
  const TensorType &b = graph.type(bias);
  const std::string what = describeNode(mm) + " + " + describeNode(add);
  if (c.rank() != 2)
    return Verdict::forbid(what + ": the result " + typeToString(c) +
                           " is not 2-D; the bias folds only into a 2-D MatMul");
  if (b.rank() != 1)
    return Verdict::forbid(what + ": the operand " + graph.valueName(bias) + " " + typeToString(b) +
                           " is not a 1-D bias");
  if (b.shape[0] != c.shape[1])
    return Verdict::forbid(what + ": the bias length " + std::to_string(b.shape[0]) +
                           " is not the result's last dimension " + std::to_string(c.shape[1]));
  if (b.dtype != c.dtype)
    return Verdict::forbid(what + ": the bias dtype " + std::string(dtypeName(b.dtype)) +
                           " is not the result's " + std::string(dtypeName(c.dtype)));
  return Verdict::allow();
}

} // namespace

class MatMulBiasAddFusionPass final : public Pass {
public:
  const PassInfo &info() const override {
    static const PassInfo info{
        .name = kPassName,
        .group = PassGroup::GraphFusion,
        .default_on = true,
        .may_disable = true,
        .summary = "Folds BiasAdd (or Add of a 1-D tensor) after a MatMul into its bias input",
        .description =
            "Matches MatMul (and BatchMatMul, to say why it does not fold) followed by BiasAdd, "
            "or by Add whose other operand is 1-D. Folds when the matmul has no bias yet, the add "
            "is its only user, the result is 2-D, and the bias is 1-D with the result's last "
            "dimension and dtype. The MatMul keeps its name, gains the bias input (added in f32 "
            "before rounding) and records both nodes as its origins; users of the add read the "
            "MatMul and the add is removed."};
    return info;
  }

  Expected<PassResult> run(Graph &graph, const PassContext &) const override {
    PassResult result;
    // A fold only redirects the add's users and gives a 1-D value one more
    // user, so the users of the other matmul results stay as the view has them.
    const FusionView view(graph);
    forEachUngroupedCubeOp(graph, result, [&](NodeId id) {
      const Node &mm = graph.node(id);
      BiasUse use = findBiasUse(view, mm);
      if (use.add == kNoNode)
        return result.reject(mm, use.why_not);
      const Node &add = graph.node(use.add);
      if (Verdict why = checkBias(graph, mm, add, use.bias); !why)
        return result.reject(mm, why);
      // The bias may be produced after the matmul; compact() re-sorts.
      ++result.statistics[add.op == "BiasAdd" ? "bias_add_folded" : "add_folded"];
      const ValueId c = mm.outputs[0], y = add.outputs[0];
      const std::string add_name = add.name;
      Node &folded = graph.node(id);
      folded.inputs.push_back(use.bias);
      folded.provenance = Provenance{kPassName, {folded.name, add_name}};
      graph.eraseNode(use.add);
      graph.replaceAllUses(y, c);
      ++result.effect_times;
    });
    return result;
  }
};

KILN_REGISTER_PASS(MatMulBiasAddFusionPass);

} // namespace kiln::passes
