// Shared pieces of the fusion passes: who may join a group, and forming one.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/pass.h"
#include "passes/verdict.h"

namespace kiln::passes {

// Value users and per-node facts that fusion passes query while they grow
// groups. Valid until the graph's nodes or edges change (group assignments
// may change freely).
class FusionView {
public:
  explicit FusionView(const Graph &graph);

  const Graph &graph() const { return graph_; }
  const std::vector<NodeId> &users(ValueId v) const { return users_[v]; }
  // A graph output reads the value.
  bool isGraphOutput(ValueId v) const { return is_output_[v]; }
  // The node producing `v`, or kNoNode for graph inputs.
  NodeId producer(ValueId v) const { return graph_.value(v).producer; }
  // Every user of every output of `node` is in `members` (and none is a graph output).
  bool outputsStayInside(NodeId node, const std::vector<NodeId> &members) const;

private:
  const Graph &graph_;
  std::vector<std::vector<NodeId>> users_;
  std::vector<bool> is_output_;
};

// `v` is a splat: produced by a Fill, or holding one element.
bool isSplat(const FusionView &view, ValueId v);

// Adds to `members` the ungrouped Fill nodes feeding them whose every user is
// a member. A Fill shared by several kernels stays outside: each reads the
// splat as a scalar input.
void absorbPrivateFills(const FusionView &view, std::vector<NodeId> &members);

// Allows `members` (distinct, ungrouped nodes) to form one kernel when the
// set is convex (no path leaves it and comes back); otherwise forbids,
// naming the node through which the path runs.
Verdict checkConvex(const FusionView &view, const std::vector<NodeId> &members);

// Allows when no member belongs to a group yet; otherwise "'<node>' is
// already in fused group '<group>' (formed by <pass>)".
Verdict checkUngrouped(const Graph &graph, const std::vector<NodeId> &members);

// Makes `members` one group named "fused.<anchor's name>", formed by `pass`.
GroupId formGroup(Graph &graph, const std::vector<NodeId> &members, NodeId anchor,
                  const std::string &kernel, const std::string &pass, Intermediates intermediates);

// The row kernels' (rms_norm, softmax and their gradients) last step: unless
// a member is grouped already or the set is not convex (then the anchor is
// rejected with the reason), `members` and their private splats become one
// group of `kernel` keeping its intermediates in f32, and the pass's effect
// is counted.
bool formRowKernel(Graph &graph, const FusionView &view, std::vector<NodeId> members, NodeId anchor,
                   const std::string &kernel, const std::string &pass, PassResult &result);

} // namespace kiln::passes
