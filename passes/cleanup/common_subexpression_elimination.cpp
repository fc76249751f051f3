// Common subexpression elimination by hashing (op, inputs, attributes, group,
// output types) in one walk in node order. Inputs are redirected to the
// survivors first, so chains of duplicates merge in the same walk.
#include "passes/cleanup/common_subexpression_elimination.h"

#include <bit>
#include <cstdint>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "passes/pass_context.h"
#include "passes/pass_registry.h"

namespace kiln::passes {
namespace {

constexpr const char *kPassName = "CommonSubexpressionEliminationPass";

size_t mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }

size_t hashAttr(const AttrValue &value) {
  size_t h = value.index();
  std::visit(
      [&](const auto &x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, double>) {
          h = mix(h, std::bit_cast<uint64_t>(x));
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          for (double d : x)
            h = mix(h, std::bit_cast<uint64_t>(d));
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          for (int64_t i : x)
            h = mix(h, std::hash<int64_t>{}(i));
        } else if constexpr (std::is_same_v<T, DType>) {
          h = mix(h, static_cast<size_t>(x));
        } else {
          h = mix(h, std::hash<T>{}(x));
        }
      },
      value);
  return h;
}

// Doubles compare by their bits: Fill(0.0) and Fill(-0.0) are different constants.
bool sameAttr(const AttrValue &a, const AttrValue &b) {
  if (a.index() != b.index())
    return false;
  return std::visit(
      [&](const auto &x) {
        using T = std::decay_t<decltype(x)>;
        const T &y = std::get<T>(b);
        if constexpr (std::is_same_v<T, double>) {
          return std::bit_cast<uint64_t>(x) == std::bit_cast<uint64_t>(y);
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          if (x.size() != y.size())
            return false;
          for (size_t i = 0; i < x.size(); ++i)
            if (std::bit_cast<uint64_t>(x[i]) != std::bit_cast<uint64_t>(y[i]))
              return false;
          return true;
        } else {
          return x == y;
        }
      },
      a);
}

bool sameAttrs(const AttrMap &a, const AttrMap &b) {
  if (a.size() != b.size())
    return false;
  for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j)
    if (i->first != j->first || !sameAttr(i->second, j->second))
      return false;
  return true;
}

class Eliminator {
public:
  explicit Eliminator(Graph &graph) : graph_(graph), replacement_(graph.numValues()) {
    for (size_t v = 0; v < replacement_.size(); ++v)
      replacement_[v] = static_cast<ValueId>(v);
    buckets_.reserve(graph.numNodes());
  }

  PassResult run() {
    PassResult result;
    for (NodeId id = 0; id < static_cast<NodeId>(graph_.numNodes()); ++id) {
      if (graph_.isErased(id))
        continue;
      Node &node = graph_.node(id);
      for (size_t i = 0; i < node.inputs.size(); ++i)
        if (replacement_[node.inputs[i]] != node.inputs[i])
          graph_.setInput(id, i, replacement_[node.inputs[i]]);
      std::vector<NodeId> &bucket = buckets_[hashNode(node)];
      NodeId survivor = kNoNode;
      for (NodeId other : bucket)
        if (same(graph_.node(other), node)) {
          survivor = other;
          break;
        }
      if (survivor == kNoNode) {
        bucket.push_back(id);
        continue;
      }
      for (size_t k = 0; k < node.outputs.size(); ++k)
        replacement_[node.outputs[k]] = graph_.node(survivor).outputs[k];
      graph_.eraseNode(id);
      ++result.match_times;
      ++result.effect_times;
      ++result.statistics["merged_" + node.op];
    }
    for (GraphOutput &out : graph_.mutableOutputs())
      out.value = replacement_[out.value];
    result.statistics["nodes_removed"] = result.effect_times;
    return result;
  }

private:
  size_t hashNode(const Node &node) const {
    size_t h = std::hash<std::string>{}(node.op);
    h = mix(h, static_cast<size_t>(node.group));
    for (ValueId in : node.inputs)
      h = mix(h, static_cast<size_t>(in));
    for (const auto &[name, value] : node.attrs)
      h = mix(mix(h, std::hash<std::string>{}(name)), hashAttr(value));
    return h;
  }

  bool same(const Node &a, const Node &b) const {
    if (a.op != b.op || a.group != b.group || a.inputs != b.inputs ||
        a.outputs.size() != b.outputs.size() || !sameAttrs(a.attrs, b.attrs))
      return false;
    for (size_t k = 0; k < a.outputs.size(); ++k)
      if (!(graph_.type(a.outputs[k]) == graph_.type(b.outputs[k])))
        return false;
    return true;
  }

  Graph &graph_;
  std::vector<ValueId> replacement_; // survivor's value for each merged node's output
  std::unordered_map<size_t, std::vector<NodeId>> buckets_;
};

} // namespace

PassResult eliminateCommonSubexpressions(Graph &graph) { return Eliminator(graph).run(); }

const PassInfo &CommonSubexpressionEliminationPass::info() const {
  static const PassInfo info{
      .name = kPassName,
      .group = PassGroup::Cleanup,
      .default_on = true,
      .may_disable = true,
      .summary = "Merges nodes that compute the same thing",
      .description =
          "Two nodes with the same op, the same inputs, bit-identical attributes and the same "
          "fusion group compute the same values (kiln ops are pure): the first in node order "
          "survives and the other's users read its outputs. Typical hits are duplicate Fill "
          "constants (eps, scale factors) and duplicate Casts and Reshapes of one value."};
  return info;
}

Expected<PassResult> CommonSubexpressionEliminationPass::run(Graph &graph,
                                                             const PassContext &) const {
  return eliminateCommonSubexpressions(graph);
}

KILN_REGISTER_PASS(CommonSubexpressionEliminationPass);

} // namespace kiln::passes
