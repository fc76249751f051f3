// AdamWPrologueFusionPass: the update program scales each gradient (the
// loss scale's inverse, the clipping factor) and casts it to the parameter's
// dtype before AdamW; as kernels of their own the scaled gradient is written
// and read back once more than the update needs. The scale and the cast join
// the AdamW kernel, which then reads the raw gradient once. Where the update
// also writes the parameter's compute copy (a Cast of the new parameter,
// compiler/parallel/weight_copies.h), that Cast joins too, and the copy is
// written in the same pass over memory instead of reading the new parameter
// back:
//
//   g --> Mul(g, s) --> [Cast] --> AdamW(p, ., m, v, lr, t) [--> Cast]   one "adamw" kernel
//
// Storage numerics: the product and the cast round as the unfused ops do,
// so the update is the same bits.
#include <string>
#include <vector>

#include "passes/fusion/fusion_group_util.h"
#include "passes/pass_context.h"
#include "passes/pass_registry.h"

namespace kiln::passes {
namespace {

constexpr const char *kPassName = "AdamWPrologueFusionPass";

class AdamWPrologueFusionPass final : public Pass {
public:
  const PassInfo &info() const override {
    static const PassInfo info{
        .name = kPassName,
        .group = PassGroup::UBFusion,
        .default_on = true,
        .may_disable = true,
        .summary = "Fuses the gradient's scale and cast, and the weight copy's cast, into the "
                   "AdamW kernel",
        .description =
            "Anchored at each ungrouped AdamW: when its gradient is Mul(g, s) by a splat, "
            "possibly followed by a Cast, and AdamW is the only reader of each, the Mul, the "
            "Cast and the AdamW become one 'adamw' kernel with Storage numerics (each op "
            "rounds as unfused, so the update is the same bits). The update then reads the "
            "raw gradient once instead of writing the scaled one and reading it back. A Cast "
            "of the new parameter (the compute copy mixed-precision training keeps) joins the "
            "kernel too, when it is the only node reading it."};
    return info;
  }

  Expected<PassResult> run(Graph &graph, const PassContext &) const override {
    PassResult result;
    FusionView view(graph);
    for (NodeId id = 0; id < static_cast<NodeId>(graph.numNodes()); ++id) {
      const Node &adam = graph.node(id);
      if (graph.isErased(id) || adam.op != "AdamW" || adam.group != kNoGroup)
        continue;
      ++result.match_times;
      std::vector<NodeId> members{id};
      std::string why = grow(view, adam.inputs[1], members);
      addCopyCast(view, adam.outputs[0], members);
      if (members.size() < 2) {
        result.reject(adam, "AdamW '" + adam.name + "' not fused: " + why);
        continue;
      }
      if (Verdict convex = checkConvex(view, members); !convex) {
        result.reject(adam, "AdamW '" + adam.name + "' not fused: " + convex.reason());
        continue;
      }
      absorbPrivateFills(view, members);
      formGroup(graph, members, id, "adamw", kPassName, Intermediates::Storage);
      ++result.effect_times;
    }
    return result;
  }

private:
  // Adds to `members` the ungrouped Cast that is the only node reading the
  // new parameter `p` (which may be a graph output besides).
  static void addCopyCast(const FusionView &view, ValueId p, std::vector<NodeId> &members) {
    const Graph &graph = view.graph();
    if (view.users(p).size() != 1)
      return;
    const NodeId cast = view.users(p).front();
    if (graph.node(cast).op == "Cast" && graph.node(cast).group == kNoGroup)
      members.push_back(cast);
  }

  // Adds to `members` the ungrouped Cast and Mul by a splat that make the
  // gradient `g`, each read by nothing else; returns why it stopped.
  static std::string grow(const FusionView &view, ValueId g, std::vector<NodeId> &members) {
    const Graph &graph = view.graph();
    for (const char *op : {"Cast", "Mul"}) {
      const NodeId p = view.producer(g);
      if (p == kNoNode || graph.node(p).group != kNoGroup)
        return "its gradient is no ungrouped scale or cast";
      if (view.isGraphOutput(g) || view.users(g).size() != 1)
        return "another node reads its gradient";
      const Node &node = graph.node(p);
      if (node.op == "Cast" && std::string(op) == "Cast") {
        members.push_back(p);
        g = node.inputs[0];
        continue;
      }
      if (node.op != "Mul")
        return "its gradient is made by " + node.op + ", not a scale";
      const bool scalar = isSplat(view, node.inputs[1]) &&
                          graph.type(node.inputs[0]).shape == graph.type(node.outputs[0]).shape;
      if (!scalar)
        return "its gradient's Mul is not a scale by a splat";
      members.push_back(p);
      return "";
    }
    return "";
  }
};

} // namespace

KILN_REGISTER_PASS(AdamWPrologueFusionPass);

} // namespace kiln::passes
