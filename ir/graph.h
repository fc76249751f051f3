// The graph IR: SSA values produced by nodes kept in topological order.
//
// Values and nodes are addressed by dense ids into the graph's tables. A value
// is either a graph input (producer == kNoNode) or output `index` of a node.
// Every node has a stable scoped name ("transformer.h.3.attn.softmax") that
// dumps, reports and error messages use, and a provenance saying which pass
// created it and which original nodes it stands for.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/attribute.h"
#include "ir/shape.h"
#include "support/error.h"

namespace kiln {

using ValueId = int32_t;
using NodeId = int32_t;
using GroupId = int32_t;
inline constexpr ValueId kNoValue = -1;
inline constexpr NodeId kNoNode = -1;
inline constexpr GroupId kNoGroup = -1;

// What a graph input stands for; it decides where the runtime gets its data.
// A Frozen input is a weight that is not trained (the base model under
// LoRA): bound like a Parameter, but no gradient, master copy or moments.
// WeightCopy: a trained weight in the dtype the step computes in, which the
// runtime holds beside the weight and the update writes (Megatron's bf16
// parameters beside the fp32 main ones; compiler/parallel/weight_copies.h).
enum class InputRole : uint8_t {
  Data,
  Parameter,
  OptimizerState,
  Hyperparameter,
  Frozen,
  WeightCopy
};

// Weights, trained or frozen: what a model's weights file supplies.
inline bool isWeight(InputRole role) {
  return role == InputRole::Parameter || role == InputRole::Frozen;
}

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
  GroupId group = kNoGroup; // the fusion group (one kernel) this node belongs to
};

// How a fused kernel holds the values that never leave it.
enum class Intermediates : uint8_t {
  Storage, // rounded to their own dtype, as the unfused ops would (vector-unit chains)
  F32,     // kept in f32 (a cube result in L0C before FixPipe, a row reduction)
};
std::string_view intermediatesName(Intermediates i);
std::optional<Intermediates> parseIntermediates(std::string_view name);

// A set of nodes that becomes one kernel. Members are the nodes whose `group`
// is this group's id; the set must be convex (no path leaves it and comes
// back), and compact() keeps the members contiguous. Only the group's outputs
// are stored to device memory.
struct FusionGroup {
  std::string name;      // stable, from the anchor node: "fused.transformer.h.0.attn.c_attn"
  std::string kernel;    // the kind of fused kernel: "matmul_fixpipe", "eltwise", ...
  std::string formed_by; // the pass or fusion rule that formed it
  Intermediates intermediates = Intermediates::Storage;
  bool operator==(const FusionGroup &) const = default;
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

// The ops a graph is written in beyond the built-in ones: a job's custom ops.
// The one implementation is ops::OpRegistry, which ops::opsOf(graph) returns;
// the IR, below the op layer, holds it type-erased, as an MLIR operation
// reaches its dialects through its context rather than a process-wide table.
class OpVocabulary {
public:
  virtual ~OpVocabulary() = default;
};

class Graph {
public:
  explicit Graph(std::string name = "main") : name_(std::move(name)) {}

  const std::string &name() const { return name_; }
  void setName(std::string name) { name_ = std::move(name); }

  // Null: the built-in ops only. A graph made from another takes its
  // vocabulary (extractSubgraph does; so must every pass that builds one).
  const std::shared_ptr<const OpVocabulary> &vocabulary() const { return vocabulary_; }
  void setVocabulary(std::shared_ptr<const OpVocabulary> vocabulary) {
    vocabulary_ = std::move(vocabulary);
  }

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
  // Number of elements of the weights (Parameter and Frozen inputs).
  int64_t parameterCount() const;

  // For each value, the nodes that read it (one entry per use).
  std::vector<std::vector<NodeId>> computeUsers() const;

  // Fusion groups.
  GroupId addGroup(FusionGroup group);
  const std::vector<FusionGroup> &groups() const { return groups_; }
  const FusionGroup &group(GroupId id) const { return groups_[id]; }
  // Member nodes of each group, in node order.
  std::vector<std::vector<NodeId>> groupMembers() const;

  // Rewriting. Erased nodes stay in place (skip them with isErased) until
  // compact(), which drops them, removes empty groups, re-sorts the nodes
  // topologically (keeping each group's members contiguous and otherwise the
  // present order) and renumbers nodes, values and groups. Every id held
  // across compact() is invalid afterwards; names are stable.
  void replaceAllUses(ValueId from, ValueId to);
  // Appends a copy of `source`'s node `id` (op, name, attributes,
  // provenance, output types) reading `inputs`; value_map[v] becomes the
  // copy's output for each output v of the original.
  NodeId addCopyOf(const Graph &source, NodeId id, std::vector<ValueId> inputs,
                   std::vector<ValueId> &value_map);
  void setInput(NodeId node, size_t index, ValueId value) { nodes_[node].inputs[index] = value; }
  // Changes what a node output holds (precision passes re-type values; the
  // verifier checks the result against the op's inference).
  void setType(ValueId value, TensorType type) { values_[value].type = std::move(type); }
  void eraseNode(NodeId id);
  bool isErased(NodeId id) const { return id < static_cast<NodeId>(erased_.size()) && erased_[id]; }
  // Errors when an erased node's output is still used, or when the groups
  // form a cycle (a non-convex group); the graph is unchanged then.
  Status compact();

private:
  // The parts of compact().
  Status checkErasedUnread() const;
  Expected<std::vector<NodeId>> scheduleOrder() const;
  void renumber(const std::vector<NodeId> &order);

  std::string name_;
  std::shared_ptr<const OpVocabulary> vocabulary_;
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<GraphInput> inputs_;
  std::vector<GraphOutput> outputs_;
  std::vector<FusionGroup> groups_;
  std::vector<bool> erased_;
  mutable std::unordered_map<std::string, NodeId> node_index_;
};

} // namespace kiln
