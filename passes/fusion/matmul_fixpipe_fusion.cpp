// TbeMatmulFixPipeFusionPass (CANN UBFusion, priority 4295): a MatMul or
// BatchMatMul and the epilogue FixPipe applies on the way out of L0C become
// one kernel. On chips with fix_pipe_l0c2out (910B and later) the cube result
// stays in the f32 accumulator and FixPipe converts it (Cast to a float
// dtype), adds a bias, applies the ReLU family, quantises, as it writes it
// out; the chip's list is target.fixpipe.epilogue_ops.
//
//   MatMul|BatchMatMul -> (Reshape)* -> op -> (Reshape)* -> op ...   op in FixPipe's list
//
// Each link is the only user of the previous one; a Reshape is a free view in
// ND layout and is absorbed between epilogue ops. FixPipe has one stage per
// op, so each op appears once; a bias is added per output column, so a
// BiasAdd after a Reshape that changes the last dimension ends the chain. The
// group keeps its intermediates in f32 (Intermediates::F32): only the last
// link's result is rounded, to its own dtype.
#include <memory>
#include <string>
#include <vector>

#include "passes/fusion/fusion_group_util.h"
#include "passes/fusion/matmul_epilogue.h"
#include "passes/pass_context.h"
#include "passes/pass_registry.h"

namespace kiln::passes {
namespace {

constexpr const char *kPassName = "TbeMatmulFixPipeFusionPass";

std::string fixpipeOpList(const target::Target &target) {
  std::string list;
  for (const std::string &op : target.fixpipe.epilogue_ops)
    list += (list.empty() ? "" : ", ") + (op == "Cast" ? std::string("Cast to a float dtype") : op);
  return list;
}

LinkVerdict fixpipeLink(const target::Target &target, const Graph &graph, const Node &next,
                        const EpilogueChain &chain) {
  if (next.op == "Reshape")
    return LinkVerdict::view();
  if (!target.fixpipeApplies(next.op))
    return LinkVerdict::stop(describeNode(next) + " is not an epilogue FixPipe applies on " +
                             target.name + " (it applies " + fixpipeOpList(target) + ")");
  for (NodeId m : chain.walked)
    if (graph.node(m).op == next.op)
      return LinkVerdict::stop(describeNode(next) + ": FixPipe applies each epilogue op once and " +
                               describeNode(graph.node(m)) + " already is one");
  if (next.op == "Cast") {
    const DType to = next.attrs.getDType("dtype");
    if (!isFloat(to))
      return LinkVerdict::stop(describeNode(next) + " converts to " + std::string(dtypeName(to)) +
                               "; FixPipe converts the f32 accumulator only to a float dtype");
  }
  if (next.op == "BiasAdd") {
    if (next.inputs[0] != chain.end(graph))
      return LinkVerdict::stop(describeNode(next) + " reads the matmul result as its bias");
    for (NodeId m : chain.walked) {
      const Node &v = graph.node(m);
      if (v.op == "Reshape" &&
          graph.type(v.inputs[0]).shape.back() != graph.type(v.outputs[0]).shape.back())
        return LinkVerdict::stop(describeNode(next) + " adds along the last dimension of " +
                                 describeNode(v) +
                                 ", which is not the matmul's; FixPipe adds a bias per column");
    }
  }
  return LinkVerdict::take();
}

// FixPipe's verdict on each link; a formed chain counts its epilogue ops by
// op and the Reshapes it absorbed.
class FixPipeLinks final : public EpilogueLinks {
public:
  FixPipeLinks(const target::Target &target, const Graph &graph) : target_(target), graph_(graph) {}
  LinkVerdict operator()(NodeId next, const EpilogueChain &so_far) override {
    return fixpipeLink(target_, graph_, graph_.node(next), so_far);
  }
  void count(const EpilogueChain &formed, PassResult &result) const override {
    for (NodeId m : formed.members)
      if (m != formed.members.front())
        ++result.statistics[graph_.node(m).op == "Reshape" ? "reshapes_absorbed"
                                                           : "epilogue." + graph_.node(m).op];
  }

private:
  const target::Target &target_;
  const Graph &graph_;
};

} // namespace

class TbeMatmulFixPipeFusionPass final : public Pass {
public:
  const PassInfo &info() const override {
    static const PassInfo info{
        .name = kPassName,
        .group = PassGroup::UBFusion,
        .default_on = true,
        .may_disable = true,
        .summary = "Fuses a MatMul/BatchMatMul with the epilogue FixPipe applies out of L0C",
        .description =
            "Matches MatMul and BatchMatMul. Takes the chain of single-user ops after it that "
            "the target's FixPipe applies (target.fixpipe.epilogue_ops: Cast to a float dtype, "
            "BiasAdd, the ReLU family, quantisation), each at most once, absorbing Reshapes "
            "between them; a BiasAdd must still run along the matmul's columns. At least one "
            "FixPipe op is needed. The group (kernel matmul_fixpipe) keeps its intermediates in "
            "f32, as the accumulator does until FixPipe writes the result out. Does nothing on "
            "targets without FixPipe."};
    return info;
  }

  Verdict appliesTo(const PassContext &ctx) const override {
    if (ctx.target().fixpipe.present)
      return Verdict::allow();
    return Verdict::forbid("target " + ctx.target().name + " has no FixPipe (fix_pipe_l0c2out); " +
                           kPassName + " fuses nothing there");
  }

  Expected<PassResult> run(Graph &graph, const PassContext &ctx) const override {
    const target::Target &target = ctx.target();
    return runEpilogueFusion(graph, {kPassName, "matmul_fixpipe", "FixPipe", Intermediates::F32,
                                     [&](const FusionView &view) {
                                       return std::make_unique<FixPipeLinks>(target, view.graph());
                                     }});
  }
};

KILN_REGISTER_PASS(TbeMatmulFixPipeFusionPass);

} // namespace kiln::passes
