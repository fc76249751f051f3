// CastFusionPass: a Cast that the other fusion passes left as a kernel of its
// own joins the kernel that makes its input, so that value is never written
// and read back in the other dtype:
//
//   epilogue  x = P(...) in group G, Cast(x) x's only reader:
//             G stores the cast (a narrowing or same-size cast only)
//   pair      x = P(...) a lone data-movement op (Transpose, Slice, Pad,
//             Split, Gather), Cast(x) x's only reader: {P, Cast} a new kernel
//   prologue  y = Cast(x) widening, y's only reader a lone reduction R (a
//             bias gradient's SumToShape of a bf16 gradient): {Cast, R} a
//             new kernel that reads x and widens it as it loads
//
// The casts' bits do not change: a cast rounds to its dtype inside any kernel
// (its lowering rounds), a Storage group rounds every value as unfused, and
// an f32 value kept in an f32 group is the value it would have stored. So an
// epilogue into an f32 group needs an f32 x; and no cast joins a kernel
// holding a matmul or an opaque op, a reduction's output (a row sum stays a
// plain sum) or a Concat's (its pieces run as separate loops). Widening is
// exact, so a reduction that widens as it loads sums the same values.
#include <cctype>
#include <string>
#include <vector>

#include "ops/op_registry.h"
#include "passes/fusion/fusion_group_util.h"
#include "passes/fusion/ub_budget.h"
#include "passes/pass_context.h"
#include "passes/pass_registry.h"

namespace kiln::passes {
namespace {

constexpr const char *kPassName = "CastFusionPass";

ops::OpKind kindOf(const Graph &graph, const Node &node) {
  const ops::RegisteredOp *reg = ops::opsOf(graph).find(node.op);
  return reg ? reg->def.kind : ops::OpKind::Opaque;
}

// Every member of group `g` is a vector or row op (no matmul, opaque or collective op).
bool vectorGroup(const Graph &graph, const std::vector<NodeId> &members) {
  for (NodeId m : members)
    if (kindOf(graph, graph.node(m)) > ops::OpKind::Reduce)
      return false;
  return true;
}

// The cast's result may be computed where `producer` computes x.
bool castableOutput(const Graph &graph, const Node &producer) {
  if (producer.op == "Softmax" || producer.op == "SoftmaxGrad")
    return true;
  return kindOf(graph, producer) <= ops::OpKind::Injective && producer.op != "Concat";
}

bool pairable(const Node &producer) {
  static const char *const kOps[] = {"Transpose", "Slice", "Pad", "Split", "Gather"};
  for (const char *op : kOps)
    if (producer.op == op)
      return true;
  return false;
}

class CastFusionPass final : public Pass {
public:
  const PassInfo &info() const override {
    static const PassInfo info{
        .name = kPassName,
        .group = PassGroup::UBFusion,
        .default_on = true,
        .may_disable = true,
        .summary = "Folds a Cast left on its own into the kernel that makes its value",
        .description =
            "After the other fusion passes, each ungrouped Cast joins the kernel that makes "
            "its input when the cast is that value's only reader: the producer's group when "
            "the cast does not widen (the kernel stores the cast's dtype; into a group keeping "
            "f32 intermediates only from an f32 value), or, when the producer is a lone "
            "Transpose, Slice, Pad, Split or Gather, a new kernel of the two ('<op>_cast', "
            "Storage numerics, within the UB budget); a widening cast read only by a lone "
            "reduction forms a kernel with it ('cast_<op>': the reduction widens as it loads). "
            "Groups holding a matmul or an opaque op, "
            "and the outputs of reductions and Concat, are left alone. Every result keeps its "
            "bits: a cast rounds inside any kernel."};
    return info;
  }

  Expected<PassResult> run(Graph &graph, const PassContext &ctx) const override {
    PassResult result;
    FusionView view(graph);
    std::vector<std::vector<NodeId>> members = graph.groupMembers();
    for (const char *key : {"epilogues", "pairs", "prologues"})
      result.statistics[key] = 0;
    for (NodeId id = 0; id < static_cast<NodeId>(graph.numNodes()); ++id) {
      const Node &cast = graph.node(id);
      if (graph.isErased(id) || cast.op != "Cast" || cast.group != kNoGroup)
        continue;
      ++result.match_times;
      const char *how = fold(graph, view, members, id, ctx.target());
      if (!how) {
        result.reject(cast, "Cast '" + cast.name + "' not fused: no kernel beside it takes it");
        continue;
      }
      ++result.effect_times;
      ++result.statistics[how];
    }
    return result;
  }

private:
  // Folds cast `c` into a kernel; returns the statistic it counts under, or null.
  static const char *fold(Graph &graph, const FusionView &view,
                          std::vector<std::vector<NodeId>> &members, NodeId c,
                          const target::Target &target) {
    const ValueId x = graph.node(c).inputs[0], y = graph.node(c).outputs[0];
    const size_t from = dtypeSize(graph.type(x).dtype), to = dtypeSize(graph.type(y).dtype);
    const NodeId p = view.producer(x);
    const bool only_reader = !view.isGraphOutput(x) && view.users(x).size() == 1;
    auto join = [&](GroupId g) {
      std::vector<NodeId> grown = members[g];
      grown.push_back(c);
      if (!checkConvex(view, grown))
        return false;
      graph.node(c).group = g;
      members[g] = std::move(grown);
      return true;
    };
    if (p != kNoNode && only_reader && to <= from) {
      const GroupId g = graph.node(p).group;
      if (g != kNoGroup && vectorGroup(graph, members[g]) && castableOutput(graph, graph.node(p)) &&
          (graph.group(g).intermediates == Intermediates::Storage ||
           graph.type(x).dtype == DType::F32) &&
          join(g))
        return "epilogues";
    }
    if (p != kNoNode && only_reader && graph.node(p).group == kNoGroup && pairable(graph.node(p)))
      return formKernel(graph, view, members, {p, c}, graph.node(p).op + "_cast", target) ? "pairs"
                                                                                          : nullptr;
    const std::vector<NodeId> &readers = view.users(y);
    if (to > from && !view.isGraphOutput(y) && readers.size() == 1 &&
        graph.node(readers[0]).group == kNoGroup &&
        kindOf(graph, graph.node(readers[0])) == ops::OpKind::Reduce)
      return formKernel(graph, view, members, {c, readers[0]}, "cast_" + graph.node(readers[0]).op,
                        target)
                 ? "prologues"
                 : nullptr;
    return nullptr;
  }

  // Makes the two nodes of `pair` (the second its root) a new kernel named
  // `kernel` in lower case, with Storage numerics; false when it would not
  // fit the UB.
  static bool formKernel(Graph &graph, const FusionView &view,
                         std::vector<std::vector<NodeId>> &members, const std::vector<NodeId> &pair,
                         std::string kernel, const target::Target &target) {
    if (!checkUbBudget(ubUsage(view, pair, target.vector_tile_elements), target))
      return false;
    for (char &ch : kernel)
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const GroupId g = formGroup(graph, pair, pair[1], kernel, kPassName, Intermediates::Storage);
    members.resize(graph.groups().size());
    members[g] = pair;
    return true;
  }
};

} // namespace

KILN_REGISTER_PASS(CastFusionPass);

} // namespace kiln::passes
