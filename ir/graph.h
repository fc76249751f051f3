// The graph IR: SSA values produced by nodes kept in topological order.
//
// Values and nodes are addressed by dense ids into the graph's tables. A value
// is either a graph input (producer == kNoNode) or output `index` of a node.
// Every node has a stable scoped name ("transformer.h.3.attn.softmax") that
// dumps, reports and error messages use, and a provenance saying which pass
// created it and which original nodes it stands for.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/attribute.h"
#include "ir/shape.h"

namespace kiln {

using ValueId = int32_t;
using NodeId = int32_t;
inline constexpr ValueId kNoValue = -1;
inline constexpr NodeId kNoNode = -1;

// What a graph input stands for; it decides where the runtime gets its data.
enum class InputRole : uint8_t { Data, Parameter, OptimizerState, Hyperparameter };

std::string_view inputRoleName(InputRole role);
std::optional<InputRole> parseInputRole(std::string_view name);

struct Value {
  TensorType type;
  NodeId producer = kNoNode;
  int32_t index = 0; // which output of the producer, or which graph input
};

struct Provenance {
  std::string pass;                 // "frontend", "autodiff", a pass name, ...
  std::vector<std::string> origins; // names of the nodes this one stands for
  bool operator==(const Provenance &) const = default;
};

struct Node {
  std::string op;
  std::string name;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  AttrMap attrs;
  Provenance provenance;
};

struct GraphInput {
  std::string name;
  ValueId value = kNoValue;
  InputRole role = InputRole::Data;
};

struct GraphOutput {
  std::string name;
  ValueId value = kNoValue;
};

class Graph {
public:
  explicit Graph(std::string name = "main") : name_(std::move(name)) {}

  const std::string &name() const { return name_; }
  void setName(std::string name) { name_ = std::move(name); }

  ValueId addInput(std::string name, TensorType type, InputRole role);
  // Appends a node after all existing ones; its inputs must already exist.
  NodeId addNode(std::string op, std::string name, std::vector<ValueId> inputs,
                 const std::vector<TensorType> &output_types, AttrMap attrs = {},
                 Provenance provenance = {});
  void addOutput(std::string name, ValueId value);

  const Value &value(ValueId id) const { return values_[id]; }
  const TensorType &type(ValueId id) const { return values_[id].type; }
  const Node &node(NodeId id) const { return nodes_[id]; }
  Node &node(NodeId id) { return nodes_[id]; }
  size_t numValues() const { return values_.size(); }
  size_t numNodes() const { return nodes_.size(); }

  const std::vector<Node> &nodes() const { return nodes_; }
  const std::vector<GraphInput> &inputs() const { return inputs_; }
  const std::vector<GraphOutput> &outputs() const { return outputs_; }
  std::vector<GraphOutput> &mutableOutputs() { return outputs_; }

  // Lookups by name (linear on first use, then cached until the graph changes).
  const GraphInput *findInput(std::string_view name) const;
  const GraphOutput *findOutput(std::string_view name) const;
  NodeId findNode(std::string_view name) const;

  // The printable, stable name of a value: the input's name, the producing
  // node's name, or "<node name>#<index>" for the outputs of a multi-output node.
  std::string valueName(ValueId id) const;
  // Number of values of role Parameter times their element counts.
  int64_t parameterCount() const;

  // For each value, the nodes that read it (one entry per use).
  std::vector<std::vector<NodeId>> computeUsers() const;

private:
  std::string name_;
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<GraphInput> inputs_;
  std::vector<GraphOutput> outputs_;
  mutable std::unordered_map<std::string, NodeId> node_index_;
};

} // namespace kiln
