// Matching a rule's pattern against the graph, anchored at one root node.
//
// The structure is matched first: the root's op, then its inputs recursively,
// each pattern node binding one distinct graph node (through that node's
// first output) and each wildcard one value from outside the match, the same
// value wherever the wildcard appears. A commutative two-input node tries both
// orders, backtracking through the rest of the pattern. Each structural match
// is then judged: its constraints, no inner value used outside the match
// (unless the node "escapes"), no member in a group already, and the members
// convex. The first match that passes becomes a group; otherwise the first
// one's failure is the rejection reason.
//
// The search is bounded: commutative nodes double the orders to try at each
// level, so a pattern of many of them whose match fails deep down could
// backtrack for minutes. Past kMatchStepBudget steps at one root the search
// stops with an error instead.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/fusion/fusion_group_util.h"
#include "passes/fusion/rules/pattern.h"

namespace kiln::passes::rules {

struct Match {
  std::vector<NodeId> nodes;      // per pattern node
  std::vector<ValueId> wildcards; // per wildcard
  // The bound graph nodes, distinct, in node order.
  std::vector<NodeId> members() const;
};

// Goals the matcher may try at one root before it gives up.
inline constexpr size_t kMatchStepBudget = 1'000'000;

// Structural matches anchored at `root`, at most `limit` of them; an error
// naming the root when the search takes more than `budget` steps.
Expected<std::vector<Match>> matchStructure(const Graph &graph, const Pattern &pattern, NodeId root,
                                            size_t limit = 16, size_t budget = kMatchStepBudget);

// Allows when every constraint holds; otherwise says which one failed, by JSON path.
Verdict checkConstraints(const Graph &graph, const Pattern &pattern, const Match &match);

// Allows when the match may become one kernel; otherwise says why not.
Verdict checkFusible(const FusionView &view, const Pattern &pattern, const Match &match);

} // namespace kiln::passes::rules
