// Graph rewriting primitives and compaction (see Graph::compact in graph.h).
#include <queue>

#include "ir/graph.h"

namespace kiln {

void Graph::replaceAllUses(ValueId from, ValueId to) {
  for (Node &node : nodes_)
    for (ValueId &in : node.inputs)
      if (in == from)
        in = to;
  for (GraphOutput &out : outputs_)
    if (out.value == from)
      out.value = to;
}

NodeId Graph::addCopyOf(const Graph &source, NodeId id, std::vector<ValueId> inputs,
                        std::vector<ValueId> &value_map) {
  const Node n = source.node(id); // a copy: `source` may be this graph, which grows
  std::vector<TensorType> types;
  for (ValueId o : n.outputs)
    types.push_back(source.type(o));
  const NodeId copy = addNode(n.op, n.name, std::move(inputs), types, n.attrs, n.provenance);
  for (size_t k = 0; k < n.outputs.size(); ++k)
    value_map[n.outputs[k]] = node(copy).outputs[k];
  return copy;
}

void Graph::eraseNode(NodeId id) {
  if (erased_.size() < nodes_.size())
    erased_.resize(nodes_.size(), false);
  erased_[id] = true;
}

// An erased node's output still read is an error; nothing changes then.
Status Graph::checkErasedUnread() const {
  const NodeId n = static_cast<NodeId>(nodes_.size());
  auto live = [&](NodeId id) { return !isErased(id); };

  for (NodeId id = 0; id < n; ++id) {
    if (!live(id))
      continue;
    for (ValueId in : nodes_[id].inputs) {
      NodeId p = values_[in].producer;
      if (p != kNoNode && !live(p))
        return Error("graph '" + name_ + "': node '" + nodes_[id].name + "' still uses '" +
                     valueName(in) + "', whose producer was erased");
    }
  }
  for (const GraphOutput &out : outputs_) {
    NodeId p = values_[out.value].producer;
    if (p != kNoNode && !live(p))
      return Error("graph '" + name_ + "': output '" + out.name + "' still uses '" +
                   valueName(out.value) + "', whose producer was erased");
  }
  return Status::ok();
}

// The live nodes in topological order, each group's members contiguous.
Expected<std::vector<NodeId>> Graph::scheduleOrder() const {
  const NodeId n = static_cast<NodeId>(nodes_.size());
  auto live = [&](NodeId id) { return !isErased(id); };
  // Scheduling units: a fusion group, or a single ungrouped node. Units are
  // sorted with Kahn's algorithm, taking the ready unit that came first, so an
  // already sorted graph keeps its order; inside a unit nodes are sorted the
  // same way.
  const int32_t num_groups = static_cast<int32_t>(groups_.size());
  auto unitOf = [&](NodeId id) {
    return nodes_[id].group != kNoGroup ? nodes_[id].group : num_groups + id;
  };
  const int32_t num_units = num_groups + n;
  std::vector<std::vector<NodeId>> unit_nodes(num_units);
  for (NodeId id = 0; id < n; ++id)
    if (live(id))
      unit_nodes[unitOf(id)].push_back(id);

  std::vector<int32_t> unit_indegree(num_units, 0), node_indegree(n, 0);
  std::vector<std::vector<int32_t>> unit_succ(num_units);
  std::vector<std::vector<NodeId>> node_succ(n);
  for (NodeId id = 0; id < n; ++id) {
    if (!live(id))
      continue;
    for (ValueId in : nodes_[id].inputs) {
      NodeId p = values_[in].producer;
      if (p == kNoNode)
        continue;
      if (unitOf(p) == unitOf(id)) {
        node_succ[p].push_back(id);
        ++node_indegree[id];
      } else {
        unit_succ[unitOf(p)].push_back(unitOf(id));
        ++unit_indegree[unitOf(id)];
      }
    }
  }

  using Ready = std::priority_queue<std::pair<NodeId, int32_t>,
                                    std::vector<std::pair<NodeId, int32_t>>, std::greater<>>;
  Ready ready_units;
  for (int32_t u = 0; u < num_units; ++u)
    if (!unit_nodes[u].empty() && unit_indegree[u] == 0)
      ready_units.push({unit_nodes[u].front(), u});
  std::vector<NodeId> order;
  order.reserve(n);
  while (!ready_units.empty()) {
    int32_t u = ready_units.top().second;
    ready_units.pop();
    std::priority_queue<NodeId, std::vector<NodeId>, std::greater<>> ready_nodes;
    for (NodeId id : unit_nodes[u])
      if (node_indegree[id] == 0)
        ready_nodes.push(id);
    size_t emitted = 0;
    while (!ready_nodes.empty()) {
      NodeId id = ready_nodes.top();
      ready_nodes.pop();
      order.push_back(id);
      ++emitted;
      for (NodeId s : node_succ[id])
        if (--node_indegree[s] == 0)
          ready_nodes.push(s);
    }
    if (emitted != unit_nodes[u].size())
      return Error("graph '" + name_ + "': the nodes of '" + nodes_[unit_nodes[u].front()].name +
                   "' form a cycle");
    for (int32_t s : unit_succ[u])
      if (--unit_indegree[s] == 0)
        ready_units.push({unit_nodes[s].front(), s});
  }
  size_t live_count = 0;
  for (NodeId id = 0; id < n; ++id)
    live_count += live(id);
  if (order.size() != live_count) {
    for (int32_t u = 0; u < num_groups; ++u)
      if (unit_indegree[u] > 0 && !unit_nodes[u].empty())
        return Error("graph '" + name_ + "': fusion group '" + groups_[u].name +
                     "' is not convex: a path leaves it and comes back");
    return Error("graph '" + name_ + "': the nodes form a cycle");
  }
  return order;
}

// Renumbers groups (dropping empty ones), values and nodes in `order`.
void Graph::renumber(const std::vector<NodeId> &order) {
  const int32_t num_groups = static_cast<int32_t>(groups_.size());
  std::vector<GroupId> new_group(num_groups, kNoGroup);
  std::vector<FusionGroup> groups;
  for (NodeId id : order) {
    GroupId g = nodes_[id].group;
    if (g != kNoGroup && new_group[g] == kNoGroup) {
      new_group[g] = static_cast<GroupId>(groups.size());
      groups.push_back(std::move(groups_[g]));
    }
  }
  std::vector<ValueId> new_value(values_.size(), kNoValue);
  std::vector<Value> values;
  for (GraphInput &in : inputs_) {
    new_value[in.value] = static_cast<ValueId>(values.size());
    values.push_back(values_[in.value]);
    in.value = new_value[in.value];
  }
  std::vector<Node> nodes;
  nodes.reserve(order.size());
  for (NodeId old_id : order) {
    Node node = std::move(nodes_[old_id]);
    NodeId id = static_cast<NodeId>(nodes.size());
    for (ValueId &in : node.inputs)
      in = new_value[in];
    for (ValueId &out : node.outputs) {
      Value v = values_[out];
      v.producer = id;
      new_value[out] = static_cast<ValueId>(values.size());
      values.push_back(std::move(v));
      out = new_value[out];
    }
    if (node.group != kNoGroup)
      node.group = new_group[node.group];
    nodes.push_back(std::move(node));
  }
  for (GraphOutput &out : outputs_)
    out.value = new_value[out.value];
  values_ = std::move(values);
  nodes_ = std::move(nodes);
  groups_ = std::move(groups);
  erased_.clear();
  node_index_.clear();
}

Status Graph::compact() {
  KILN_RETURN_IF_ERROR(checkErasedUnread());
  KILN_ASSIGN_OR_RETURN(std::vector<NodeId> order, scheduleOrder());
  renumber(order);
  return Status::ok();
}

} // namespace kiln
