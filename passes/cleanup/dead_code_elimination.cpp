// Dead code elimination by marking from the graph outputs with a worklist,
// so it needs no particular node order.
#include "passes/cleanup/dead_code_elimination.h"

#include <vector>

#include "passes/pass_context.h"
#include "passes/pass_registry.h"

namespace kiln::passes {
namespace {

constexpr const char *kPassName = "DeadCodeEliminationPass";

} // namespace

PassResult eliminateDeadCode(Graph &graph) {
  std::vector<bool> live(graph.numNodes(), false);
  std::vector<NodeId> work;
  auto need = [&](ValueId v) {
    NodeId p = graph.value(v).producer;
    if (p != kNoNode && !live[p]) {
      live[p] = true;
      work.push_back(p);
    }
  };
  for (const GraphOutput &out : graph.outputs())
    need(out.value);
  while (!work.empty()) {
    NodeId id = work.back();
    work.pop_back();
    for (ValueId in : graph.node(id).inputs)
      need(in);
  }
  PassResult result;
  for (NodeId id = 0; id < static_cast<NodeId>(graph.numNodes()); ++id) {
    if (live[id] || graph.isErased(id))
      continue;
    graph.eraseNode(id);
    ++result.statistics["removed_" + graph.node(id).op];
    ++result.match_times;
    ++result.effect_times;
  }
  result.statistics["nodes_removed"] = result.effect_times;
  return result;
}

const PassInfo &DeadCodeEliminationPass::info() const {
  static const PassInfo info{
      .name = kPassName,
      .group = PassGroup::Cleanup,
      .default_on = true,
      .may_disable = true,
      .summary = "Removes nodes whose results no graph output needs",
      .description =
          "Marks every node a graph output depends on, transitively, and removes the others "
          "(kiln ops have no side effects). Graph inputs are kept even when unused: they are "
          "the step's signature."};
  return info;
}

Expected<PassResult> DeadCodeEliminationPass::run(Graph &graph, const PassContext &) const {
  return eliminateDeadCode(graph);
}

KILN_REGISTER_PASS(DeadCodeEliminationPass);

} // namespace kiln::passes
