#include "passes/fusion/fusion_group_util.h"

#include <algorithm>
#include <unordered_set>

namespace kiln::passes {

FusionView::FusionView(const Graph &graph)
    : graph_(graph), users_(graph.computeUsers()), is_output_(graph.numValues(), false) {
  for (const GraphOutput &out : graph.outputs())
    is_output_[out.value] = true;
}

bool FusionView::outputsStayInside(NodeId node, const std::vector<NodeId> &members) const {
  for (ValueId v : graph_.node(node).outputs) {
    if (is_output_[v])
      return false;
    for (NodeId u : users_[v])
      if (std::find(members.begin(), members.end(), u) == members.end())
        return false;
  }
  return true;
}

bool isSplat(const FusionView &view, ValueId v) {
  NodeId p = view.producer(v);
  return view.graph().type(v).numElements() == 1 ||
         (p != kNoNode && view.graph().node(p).op == "Fill");
}

void absorbPrivateFills(const FusionView &view, std::vector<NodeId> &members) {
  std::unordered_set<NodeId> inside(members.begin(), members.end());
  for (size_t i = 0; i < members.size(); ++i)
    for (ValueId v : view.graph().node(members[i]).inputs) {
      NodeId p = view.producer(v);
      if (p == kNoNode || view.graph().node(p).op != "Fill" || inside.count(p) ||
          view.graph().node(p).group != kNoGroup || !view.outputsStayInside(p, members))
        continue;
      members.push_back(p);
      inside.insert(p);
    }
}

Verdict checkConvex(const FusionView &view, const std::vector<NodeId> &members) {
  const Graph &graph = view.graph();
  std::unordered_set<NodeId> inside(members.begin(), members.end());
  NodeId last = *std::max_element(members.begin(), members.end());
  // Walk forward from the group through outside nodes; nodes are in
  // topological order, so nothing after the last member can lead back.
  std::vector<NodeId> stack;
  std::unordered_set<NodeId> seen;
  for (NodeId m : members)
    for (ValueId v : graph.node(m).outputs)
      for (NodeId u : view.users(v))
        if (!inside.count(u) && u < last && seen.insert(u).second)
          stack.push_back(u);
  while (!stack.empty()) {
    NodeId n = stack.back();
    stack.pop_back();
    for (ValueId v : graph.node(n).outputs)
      for (NodeId u : view.users(v)) {
        if (inside.count(u))
          return Verdict::forbid(
              "the result would not be one kernel: a path leaves the group through '" +
              graph.node(n).name + "' and comes back into '" + graph.node(u).name + "'");
        if (u < last && seen.insert(u).second)
          stack.push_back(u);
      }
  }
  return Verdict::allow();
}

Verdict checkUngrouped(const Graph &graph, const std::vector<NodeId> &members) {
  for (NodeId m : members) {
    GroupId g = graph.node(m).group;
    if (g != kNoGroup)
      return Verdict::forbid("'" + graph.node(m).name + "' is already in fused group '" +
                             graph.group(g).name + "' (formed by " + graph.group(g).formed_by +
                             ")");
  }
  return Verdict::allow();
}

GroupId formGroup(Graph &graph, const std::vector<NodeId> &members, NodeId anchor,
                  const std::string &kernel, const std::string &pass, Intermediates intermediates) {
  GroupId id =
      graph.addGroup(FusionGroup{"fused." + graph.node(anchor).name, kernel, pass, intermediates});
  for (NodeId m : members)
    graph.node(m).group = id;
  return id;
}

bool formRowKernel(Graph &graph, const FusionView &view, std::vector<NodeId> members, NodeId anchor,
                   const std::string &kernel, const std::string &pass, PassResult &result) {
  const Verdict verdict =
      checkUngrouped(graph, members).andThen([&] { return checkConvex(view, members); });
  if (!verdict) {
    result.reject(graph.node(anchor), verdict);
    return false;
  }
  absorbPrivateFills(view, members);
  formGroup(graph, members, anchor, kernel, pass, Intermediates::F32);
  ++result.effect_times;
  return true;
}

} // namespace kiln::passes
