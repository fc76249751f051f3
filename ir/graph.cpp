#include "ir/graph.h"

#include <cassert>

namespace kiln {

std::string_view inputRoleName(InputRole role) {
  switch (role) {
  case InputRole::Data:
    return "data";
  case InputRole::Parameter:
    return "param";
  case InputRole::OptimizerState:
    return "state";
  case InputRole::Hyperparameter:
    return "hyper";
  case InputRole::Frozen:
    return "frozen";
  case InputRole::WeightCopy:
    return "weight_copy";
  }
  return "?";
}

std::optional<InputRole> parseInputRole(std::string_view name) {
  for (InputRole r : {InputRole::Data, InputRole::Parameter, InputRole::OptimizerState,
                      InputRole::Hyperparameter, InputRole::Frozen, InputRole::WeightCopy})
    if (inputRoleName(r) == name)
      return r;
  return std::nullopt;
}

ValueId Graph::addInput(std::string name, TensorType type, InputRole role) {
  ValueId id = static_cast<ValueId>(values_.size());
  values_.push_back(Value{std::move(type), kNoNode, static_cast<int32_t>(inputs_.size())});
  inputs_.push_back(GraphInput{std::move(name), id, role});
  return id;
}

NodeId Graph::addNode(std::string op, std::string name, std::vector<ValueId> inputs,
                      const std::vector<TensorType> &output_types, AttrMap attrs,
                      Provenance provenance) {
  NodeId id = static_cast<NodeId>(nodes_.size());
  Node node;
  node.op = std::move(op);
  node.name = std::move(name);
  node.inputs = std::move(inputs);
  node.attrs = std::move(attrs);
  node.provenance = std::move(provenance);
  for (size_t i = 0; i < output_types.size(); ++i) {
    node.outputs.push_back(static_cast<ValueId>(values_.size()));
    values_.push_back(Value{output_types[i], id, static_cast<int32_t>(i)});
  }
  if (!node_index_.empty())
    node_index_.emplace(node.name, id);
  nodes_.push_back(std::move(node));
  return id;
}

void Graph::addOutput(std::string name, ValueId value) {
  outputs_.push_back(GraphOutput{std::move(name), value});
}

const GraphInput *Graph::findInput(std::string_view name) const {
  for (const GraphInput &in : inputs_)
    if (in.name == name)
      return &in;
  return nullptr;
}

const GraphOutput *Graph::findOutput(std::string_view name) const {
  for (const GraphOutput &out : outputs_)
    if (out.name == name)
      return &out;
  return nullptr;
}

NodeId Graph::findNode(std::string_view name) const {
  auto rebuild = [this] {
    node_index_.clear();
    for (size_t i = 0; i < nodes_.size(); ++i)
      node_index_.emplace(nodes_[i].name, static_cast<NodeId>(i));
  };
  if (node_index_.size() != nodes_.size())
    rebuild();
  auto it = node_index_.find(std::string(name));
  // node(id) hands out mutable nodes, so a rename can leave the index stale: check the hit.
  if (it != node_index_.end() && nodes_[it->second].name != name) {
    rebuild();
    it = node_index_.find(std::string(name));
  }
  return it == node_index_.end() ? kNoNode : it->second;
}

std::string Graph::valueName(ValueId id) const {
  if (id < 0 || static_cast<size_t>(id) >= values_.size())
    return "<invalid value " + std::to_string(id) + ">";
  const Value &v = values_[id];
  if (v.producer == kNoNode)
    return inputs_[v.index].name;
  const Node &n = nodes_[v.producer];
  if (n.outputs.size() == 1)
    return n.name;
  return n.name + "#" + std::to_string(v.index);
}

int64_t Graph::parameterCount() const {
  int64_t count = 0;
  for (const GraphInput &in : inputs_)
    if (isWeight(in.role))
      count += values_[in.value].type.numElements();
  return count;
}

std::vector<std::vector<NodeId>> Graph::computeUsers() const {
  std::vector<std::vector<NodeId>> users(values_.size());
  for (size_t i = 0; i < nodes_.size(); ++i)
    for (ValueId in : nodes_[i].inputs)
      if (in >= 0 && static_cast<size_t>(in) < values_.size())
        users[in].push_back(static_cast<NodeId>(i));
  return users;
}

} // namespace kiln

namespace kiln {

std::string_view intermediatesName(Intermediates i) {
  return i == Intermediates::F32 ? "f32" : "storage";
}

std::optional<Intermediates> parseIntermediates(std::string_view name) {
  if (name == "f32")
    return Intermediates::F32;
  if (name == "storage")
    return Intermediates::Storage;
  return std::nullopt;
}

GroupId Graph::addGroup(FusionGroup group) {
  groups_.push_back(std::move(group));
  return static_cast<GroupId>(groups_.size() - 1);
}

std::vector<std::vector<NodeId>> Graph::groupMembers() const {
  std::vector<std::vector<NodeId>> members(groups_.size());
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].group != kNoGroup && !isErased(static_cast<NodeId>(i)))
      members[nodes_[i].group].push_back(static_cast<NodeId>(i));
  return members;
}

} // namespace kiln
