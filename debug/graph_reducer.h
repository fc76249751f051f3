// Shrinking a failing graph to a small one that fails the same way, in the
// manner of delta debugging (Zeller's ddmin), llvm-reduce and Inductor's
// minifier. Candidates are made by three edits, each tried in chunks:
//
//   - drop nodes: the values a dropped node made become inputs of the graph
//     wherever a kept node reads them, and a kept value whose readers were
//     all dropped becomes an output, so a cut never changes what the kept
//     nodes compute;
//   - drop outputs, with every node that only fed them;
//   - shrink shapes: an extent of the inputs' shapes (every axis that has
//     it) is replaced by a smaller one and every node's output types are
//     inferred again; ops whose attributes spell out a shape refuse and the
//     candidate is discarded.
//
// The failure is a predicate the caller supplies ("still fails with the same
// signature"), run once per candidate; a candidate is kept when it holds.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::debug {

// True when the candidate still fails the same way; an error aborts.
using ReducePredicate = std::function<Expected<bool>(const Graph &candidate)>;

struct ReduceOptions {
  // Node names to try first as the whole graph (the failing kernel's
  // members): one trial that, when it holds, skips most of the search.
  std::vector<std::string> focus;
  int max_trials = 5000;
};

struct ReduceResult {
  Graph graph;
  size_t nodes_before = 0;
  int trials = 0;
  std::vector<std::string> log; // one line per accepted edit
};

// `graph` must fail (an error otherwise). The result is 1-minimal for node
// dropping: dropping any one of its nodes no longer fails.
Expected<ReduceResult> reduceGraph(const Graph &graph, const ReducePredicate &fails,
                                   const ReduceOptions &options = {});

// The edits, exposed for tests. Each returns the edited graph, or an error
// when the result is not a graph (nothing left, a shape inference refuses).
Expected<Graph> dropNodes(const Graph &graph, const std::vector<NodeId> &nodes);
Expected<Graph> dropOutputs(const Graph &graph, const std::vector<size_t> &outputs);
Expected<Graph> shrinkExtent(const Graph &graph, int64_t from, int64_t to);

} // namespace kiln::debug
