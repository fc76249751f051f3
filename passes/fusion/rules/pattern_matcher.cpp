#include "passes/fusion/rules/pattern_matcher.h"

#include <algorithm>
#include <unordered_set>
#include <utility>

#include "ops/op_registry.h"

namespace kiln::passes::rules {

std::vector<NodeId> Match::members() const {
  std::vector<NodeId> out = nodes;
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

namespace {

// Depth-first over a list of goals (pattern operand, graph value); a goal that
// binds a node appends that node's operands as new goals. Bindings are undone
// on the way back, so every way to satisfy the goals is visited.
class StructureMatcher {
public:
  StructureMatcher(const Graph &graph, const Pattern &pattern, size_t limit, size_t budget)
      : graph_(graph), pattern_(pattern), limit_(limit), budget_(budget) {
    current_.nodes.assign(pattern.nodes.size(), kNoNode);
    current_.wildcards.assign(pattern.wildcards.size(), kNoValue);
  }

  Expected<std::vector<Match>> run(NodeId root) {
    if (canBind(pattern_.root, root)) {
      current_.nodes[pattern_.root] = root;
      expand(pattern_.root, root, 0);
    }
    if (steps_ > budget_)
      return Error("matching the pattern at '" + graph_.node(root).name + "' took more than " +
                   std::to_string(budget_) +
                   " steps without an answer (its commutative nodes multiply the operand "
                   "orders to try); make the pattern smaller or less ambiguous");
    return std::move(found_);
  }

private:
  bool canBind(int p, NodeId n) const {
    const Node &node = graph_.node(n);
    return !graph_.isErased(n) && pattern_.opMatches(p, node.op) &&
           node.inputs.size() == pattern_.nodes[p].inputs.size() &&
           std::find(current_.nodes.begin(), current_.nodes.end(), n) == current_.nodes.end();
  }

  // Queues the operands of pattern node `p`, bound to `n`, then goes on with goal `next`.
  void expand(int p, NodeId n, size_t next) {
    const std::vector<PatternRef> &want = pattern_.nodes[p].inputs;
    const std::vector<ValueId> &have = graph_.node(n).inputs;
    const size_t mark = goals_.size();
    auto tryOrder = [&](bool swapped) {
      for (size_t k = 0; k < want.size(); ++k)
        goals_.push_back({want[k], have[swapped ? 1 - k : k]});
      solve(next);
      goals_.resize(mark);
    };
    tryOrder(false);
    if (pattern_.nodes[p].commutative && have[0] != have[1])
      tryOrder(true);
  }

  void solve(size_t i) {
    if (found_.size() >= limit_ || ++steps_ > budget_)
      return;
    if (i == goals_.size()) {
      if (wildcardsComeFromOutside())
        found_.push_back(current_);
      return;
    }
    const auto [ref, v] = goals_[i]; // a copy: goals_ grows below
    if (ref.kind == PatternRef::Kind::Wildcard) {
      ValueId &bound = current_.wildcards[ref.index];
      if (bound != kNoValue) {
        if (bound == v)
          solve(i + 1);
        return;
      }
      bound = v;
      solve(i + 1);
      current_.wildcards[ref.index] = kNoValue;
      return;
    }
    const Value &value = graph_.value(v);
    if (value.producer == kNoNode || value.index != 0)
      return;
    NodeId bound = current_.nodes[ref.index];
    if (bound != kNoNode) {
      if (bound == value.producer)
        solve(i + 1);
      return;
    }
    if (!canBind(ref.index, value.producer))
      return;
    current_.nodes[ref.index] = value.producer;
    expand(ref.index, value.producer, i + 1);
    current_.nodes[ref.index] = kNoNode;
  }

  bool wildcardsComeFromOutside() const {
    for (ValueId w : current_.wildcards) {
      NodeId producer = graph_.value(w).producer;
      if (producer != kNoNode &&
          std::find(current_.nodes.begin(), current_.nodes.end(), producer) != current_.nodes.end())
        return false;
    }
    return true;
  }

  const Graph &graph_;
  const Pattern &pattern_;
  size_t limit_;
  size_t budget_;
  size_t steps_ = 0;
  Match current_;
  std::vector<std::pair<PatternRef, ValueId>> goals_;
  std::vector<Match> found_;
};

std::string dtypeList(const std::vector<DType> &dtypes) {
  std::string out;
  for (DType d : dtypes)
    out += (out.empty() ? "" : ", ") + std::string(dtypeName(d));
  return out;
}

ValueId valueOf(const Match &m, const Graph &graph, const PatternRef &ref) {
  return ref.kind == PatternRef::Kind::Wildcard ? m.wildcards[ref.index]
                                                : graph.node(m.nodes[ref.index]).outputs[0];
}

// `node` is the bound graph node when the constraints are a node's (for attrs).
std::string check(const Graph &graph, const Pattern &pattern, const Match &m, const Constraints &c,
                  ValueId v, const Node *node) {
  const TensorType &type = graph.type(v);
  const std::string what = "'" + graph.valueName(v) + "'";
  auto failed = [&](const char *field, const std::string &why) {
    return "constraint " + c.path + "." + field + " failed: " + why;
  };
  if (!c.dtypes.empty() &&
      std::find(c.dtypes.begin(), c.dtypes.end(), type.dtype) == c.dtypes.end())
    return failed("dtype", what + " is " + std::string(dtypeName(type.dtype)) + ", not " +
                               dtypeList(c.dtypes));
  if (c.rank && type.rank() != *c.rank)
    return failed("rank", what + " has rank " + std::to_string(type.rank()) + ", not " +
                              std::to_string(*c.rank));
  if (c.shape) {
    bool ok = c.shape->size() == type.shape.size();
    for (size_t i = 0; ok && i < c.shape->size(); ++i)
      ok = (*c.shape)[i] == -1 || (*c.shape)[i] == type.shape[i];
    if (!ok)
      return failed("shape", what + " has shape " + shapeToString(type.shape) + ", not " +
                                 shapeToString(*c.shape));
  }
  for (const auto &[name, want] : c.attrs) {
    const AttrValue *have = node->attrs.find(name);
    if (!have) {
      // An attribute left out takes the op's default.
      const ops::RegisteredOp *op = ops::opsOf(graph).find(node->op);
      const ops::AttrDef *def = op ? op->def.findAttr(name) : nullptr;
      have = def && def->default_value ? &*def->default_value : nullptr;
    }
    if (!have)
      return failed("attrs", "'" + node->name + "' has no attribute '" + name + "'");
    if (!(*have == want))
      return failed("attrs", "'" + node->name + "' has " + name + "=" + attrValueToString(*have) +
                                 ", not " + attrValueToString(want));
  }
  if (c.same_shape_as) {
    ValueId other = valueOf(m, graph, *c.same_shape_as);
    if (graph.type(other).shape != type.shape)
      return failed("same_shape_as", what + " has shape " + shapeToString(type.shape) + " but '" +
                                         graph.valueName(other) + "' (" +
                                         pattern.refName(*c.same_shape_as) + ") has " +
                                         shapeToString(graph.type(other).shape));
  }
  return {};
}

} // namespace

Expected<std::vector<Match>> matchStructure(const Graph &graph, const Pattern &pattern, NodeId root,
                                            size_t limit, size_t budget) {
  return StructureMatcher(graph, pattern, limit, budget).run(root);
}

Verdict checkConstraints(const Graph &graph, const Pattern &pattern, const Match &match) {
  for (size_t p = 0; p < pattern.nodes.size(); ++p) {
    const Node &node = graph.node(match.nodes[p]);
    std::string why =
        check(graph, pattern, match, pattern.nodes[p].constraints, node.outputs[0], &node);
    if (!why.empty())
      return Verdict::forbid(std::move(why));
  }
  for (size_t w = 0; w < pattern.wildcards.size(); ++w) {
    std::string why =
        check(graph, pattern, match, pattern.wildcards[w].constraints, match.wildcards[w], nullptr);
    if (!why.empty())
      return Verdict::forbid(std::move(why));
  }
  return Verdict::allow();
}

Verdict checkFusible(const FusionView &view, const Pattern &pattern, const Match &match) {
  const Graph &graph = view.graph();
  const std::vector<NodeId> members = match.members();
  std::unordered_set<NodeId> inside(members.begin(), members.end());
  for (size_t p = 0; p < pattern.nodes.size(); ++p) {
    if (static_cast<int>(p) == pattern.root || pattern.nodes[p].escapes)
      continue;
    const Node &node = graph.node(match.nodes[p]);
    for (ValueId v : node.outputs) {
      for (NodeId user : view.users(v))
        if (!inside.count(user))
          return Verdict::forbid("'" + node.name + "' is also used by '" + graph.node(user).name +
                                 "' outside the pattern");
      if (view.isGraphOutput(v))
        for (const GraphOutput &out : graph.outputs())
          if (out.value == v)
            return Verdict::forbid("'" + node.name + "' is also used by graph output '" + out.name +
                                   "' outside the pattern");
    }
  }
  return checkUngrouped(graph, members).andThen([&] { return checkConvex(view, members); });
}

} // namespace kiln::passes::rules
