#include "passes/fusion/rules/rule_pass.h"

#include "passes/fusion/fusion_group_util.h"
#include "passes/fusion/rules/pattern_matcher.h"

namespace kiln::passes::rules {

Expected<PassResult> applyFusionRule(Graph &graph, const FusionRule &rule) {
  const Pattern &pattern = rule.pattern;
  PassResult result;
  // Forming groups changes no edge, so one view serves the whole run.
  FusionView view(graph);
  const NodeId count = static_cast<NodeId>(graph.numNodes());
  for (NodeId n = 0; n < count; ++n) {
    if (graph.isErased(n) || !pattern.opMatches(pattern.root, graph.node(n).op))
      continue;
    Expected<std::vector<Match>> structural = matchStructure(graph, pattern, n);
    if (!structural)
      return Error("fusion rule '" + rule.info.name + "'" +
                   (rule.source.empty() ? "" : " (" + rule.source + ")") + ": " +
                   structural.message() + "; or turn the rule off with --disable-pass " +
                   rule.info.name);
    const std::vector<Match> &matches = *structural;
    if (matches.empty())
      continue;
    ++result.match_times;
    std::string first_reason;
    const Match *chosen = nullptr;
    for (const Match &m : matches) {
      const Verdict verdict = checkConstraints(graph, pattern, m).andThen([&] {
        return checkFusible(view, pattern, m);
      });
      if (verdict) {
        chosen = &m;
        break;
      }
      if (first_reason.empty())
        first_reason = verdict.reason();
    }
    if (!chosen) {
      result.reject(graph.node(n), std::move(first_reason));
      continue;
    }
    std::vector<NodeId> members = chosen->members();
    formGroup(graph, members, n, rule.kernel, rule.info.name, rule.intermediates);
    ++result.effect_times;
    result.statistics["nodes fused"] += static_cast<int64_t>(members.size());
  }
  return result;
}

} // namespace kiln::passes::rules
