// CastBeforeReshapePass: Cast(Reshape(x)) becomes Reshape(Cast(x)) when the
// Reshape feeds nothing but the cast. A reshape moves no data, so the two
// orders give the same bits; with the cast next to the node that makes x,
// the fusion passes can fold it into that kernel (a matmul's epilogue, a
// normalisation's store) instead of running it as a kernel of its own.
//
//   y = Matmul(...)                       y = Matmul(...)
//   r = Reshape(y)          becomes       c = Cast(y)      <- fuses with the matmul
//   c = Cast(r)                           r = Reshape(c)
#include "passes/pass.h"
#include "passes/pass_context.h"
#include "passes/pass_registry.h"

namespace kiln::passes {
namespace {

constexpr const char *kPassName = "CastBeforeReshapePass";

class CastBeforeReshapePass : public Pass {
public:
  const PassInfo &info() const override {
    static const PassInfo info{
        .name = kPassName,
        .group = PassGroup::Precision,
        .default_on = true,
        .may_disable = true,
        .summary = "Moves a Cast above the Reshape it reads, next to the value's producer",
        .description =
            "Cast(Reshape(x)) becomes Reshape(Cast(x)) when the Reshape's only reader is the "
            "Cast (and it is no graph output). A reshape moves no data, so the result is the "
            "same bits; the cast then reads the producer of x directly, and the fusion passes "
            "can fold it into that kernel (a matmul's epilogue, a row kernel's store) rather "
            "than run it as a kernel of its own. Nodes in fusion groups are left alone."};
    return info;
  }

  Expected<PassResult> run(Graph &graph, const PassContext &) const override {
    PassResult result;
    const std::vector<std::vector<NodeId>> users = graph.computeUsers();
    std::vector<bool> is_output(graph.numValues(), false);
    for (const GraphOutput &out : graph.outputs())
      is_output[out.value] = true;
    const NodeId count = static_cast<NodeId>(graph.numNodes());
    for (NodeId id = 0; id < count; ++id) {
      if (graph.isErased(id) || graph.node(id).op != "Cast" || graph.node(id).group != kNoGroup)
        continue;
      const ValueId reshaped = graph.node(id).inputs[0];
      const NodeId r = graph.value(reshaped).producer;
      if (r == kNoNode || graph.node(r).op != "Reshape" || graph.node(r).group != kNoGroup)
        continue;
      ++result.match_times;
      if (users[reshaped].size() != 1 || is_output[reshaped]) {
        result.reject(graph.node(id), "Cast '" + graph.node(id).name + "' stays after Reshape '" +
                                          graph.node(r).name + "': the reshape has other readers");
        continue;
      }
      swap(graph, r, id);
      ++result.effect_times;
    }
    return result;
  }

private:
  // Cast `c` of Reshape `r` as a cast of r's input, reshaped; both keep their names.
  static void swap(Graph &graph, NodeId r, NodeId c) {
    const Node reshape = graph.node(r), cast = graph.node(c);
    const ValueId x = reshape.inputs[0];
    const TensorType &out = graph.type(cast.outputs[0]);
    const Provenance moved{kPassName, {cast.name, reshape.name}};
    graph.eraseNode(c);
    graph.eraseNode(r);
    const NodeId new_cast = graph.addNode(
        "Cast", cast.name, {x}, {TensorType{out.dtype, graph.type(x).shape}}, cast.attrs, moved);
    const NodeId new_reshape = graph.addNode(
        "Reshape", reshape.name, {graph.node(new_cast).outputs[0]}, {out}, reshape.attrs, moved);
    graph.replaceAllUses(cast.outputs[0], graph.node(new_reshape).outputs[0]);
  }
};

KILN_REGISTER_PASS(CastBeforeReshapePass);

} // namespace
} // namespace kiln::passes
