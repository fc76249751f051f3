// ATbeMatmulElemwiseFusionPass (CANN UBFusion, priority 4300): a MatMul or
// BatchMatMul and a short elementwise epilogue (Div by the attention scale,
// Mul, Add, Silu, ...) become one kernel: the cube result leaves L0C rounded
// to its dtype and the vector unit applies the epilogue in the UB before the
// one store (Intermediates::Storage: every value rounds as unfused).
//
//   MatMul|BatchMatMul -> (Reshape)* -> op -> (Reshape)* -> op ...   op elementwise or broadcast
//
// Each link is the only user of the previous one and keeps its shape (other
// operands broadcast into it and come from outside the group).
//
// Length limit, from the target's UB (the model of passes/fusion/ub_budget.h,
// shared with TbeEltwiseFusionPass): the epilogue's links are a vector kernel
// that reads the cube result and every outside operand tile by tile, and the
// chain grows while their buffers fit in memory.ub_bytes. On ascend910b
// (192 KiB, 4096-element tiles, 16 KiB in f32) that is nine unary f32 ops, or
// three with a full-size operand each. CANN's own pass takes one op.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ops/op_registry.h"
#include "passes/fusion/fusion_group_util.h"
#include "passes/fusion/matmul_epilogue.h"
#include "passes/fusion/ub_budget.h"
#include "passes/pass_context.h"
#include "passes/pass_registry.h"

namespace kiln::passes {
namespace {

constexpr const char *kPassName = "ATbeMatmulElemwiseFusionPass";

// Decides the links of one chain; the UB account covers the links only, as
// the cube's operands live in L1/L0, not in the UB.
class ElemwiseLinks final : public EpilogueLinks {
public:
  ElemwiseLinks(const target::Target &target, const FusionView &view)
      : target_(target), view_(view) {}

  LinkVerdict operator()(NodeId id, const EpilogueChain &chain) override {
    const Graph &graph = view_.graph();
    const Node &next = graph.node(id);
    if (next.op == "Reshape")
      return LinkVerdict::view();
    const ops::RegisteredOp *reg = ops::opsOf(graph).find(next.op);
    const ops::OpKind kind = reg ? reg->def.kind : ops::OpKind::Opaque;
    if (kind != ops::OpKind::Elementwise && kind != ops::OpKind::Broadcast)
      return LinkVerdict::stop(describeNode(next) + " is " + std::string(ops::opKindName(kind)) +
                               "; the vector epilogue takes elementwise and broadcast ops");
    const TensorType &in = graph.type(chain.end(graph)), &out = graph.type(next.outputs[0]);
    if (in.shape != out.shape)
      return LinkVerdict::stop(describeNode(next) + " turns " + typeToString(in) + " into " +
                               typeToString(out) +
                               "; an epilogue op keeps the shape of the cube result");
    std::vector<NodeId> links(chain.walked.begin() + 1, chain.walked.end());
    links.push_back(id);
    UbUsage usage = ubUsage(view_, links, target_.vector_tile_elements);
    if (Verdict why = checkUbBudget(usage, target_); !why) {
      cut_by_ub_ = true;
      return LinkVerdict::stop(describeNode(next) + " does not fit in the UB: the epilogue " +
                               why.reason());
    }
    return LinkVerdict::take();
  }

  void count(const EpilogueChain &formed, PassResult &result) const override {
    result.statistics["epilogue_ops"] += formed.epilogue_ops;
    result.statistics["reshapes_absorbed"] += formed.views;
    if (cut_by_ub_)
      ++result.statistics["chains_cut_by_ub"];
  }

private:
  const target::Target &target_;
  const FusionView &view_;
  bool cut_by_ub_ = false;
};

} // namespace

class ATbeMatmulElemwiseFusionPass final : public Pass {
public:
  const PassInfo &info() const override {
    static const PassInfo info{
        .name = kPassName,
        .group = PassGroup::UBFusion,
        .default_on = true,
        .may_disable = true,
        .summary =
            "Fuses a MatMul/BatchMatMul with a short elementwise epilogue on the vector unit",
        .description =
            "Matches MatMul and BatchMatMul. Takes the chain of single-user elementwise and "
            "broadcast ops after it that keep the result's shape, absorbing Reshapes between "
            "them, while the chain's tile buffers (vector_tile_elements elements per value, "
            "inputs and outputs double-buffered) fit in the target's UB. At least one op is "
            "needed. The group (kernel matmul_elemwise) rounds every value to its dtype, as the "
            "cube result leaves L0C before the vector unit reads it."};
    return info;
  }

  Expected<PassResult> run(Graph &graph, const PassContext &ctx) const override {
    const target::Target &target = ctx.target();
    return runEpilogueFusion(graph, {kPassName, "matmul_elemwise", "elementwise",
                                     Intermediates::Storage, [&](const FusionView &view) {
                                       return std::make_unique<ElemwiseLinks>(target, view);
                                     }});
  }
};

KILN_REGISTER_PASS(ATbeMatmulElemwiseFusionPass);

} // namespace kiln::passes
