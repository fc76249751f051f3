// The pattern of a declarative fusion rule: a small DAG of op nodes whose
// leaves are wildcards ("$x", any value from outside the match). Parsed from
// a rule file by pattern_parser.h, matched by pattern_matcher.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/attribute.h"
#include "ir/dtype.h"

namespace kiln::passes::rules {

// An operand of a pattern node: another pattern node (its first output) or a
// wildcard.
struct PatternRef {
  enum class Kind : uint8_t { Node, Wildcard };
  Kind kind = Kind::Node;
  int index = 0; // into Pattern::nodes or Pattern::wildcards
  bool operator==(const PatternRef &) const = default;
};

// Conditions on one value (a node's first output or a wildcard's value).
// `path` is where they were written, so a failed check names its JSON path.
struct Constraints {
  std::string path;
  std::vector<DType> dtypes; // empty: any dtype
  std::optional<int64_t> rank;
  std::optional<std::vector<int64_t>> shape;            // -1: any extent
  std::vector<std::pair<std::string, AttrValue>> attrs; // nodes only: equality
  std::optional<PatternRef> same_shape_as;

  bool empty() const {
    return dtypes.empty() && !rank && !shape && attrs.empty() && !same_shape_as;
  }
};

struct PatternNode {
  std::string id;
  std::string path;             // "$.pattern.nodes[1]"
  std::vector<std::string> ops; // empty: any op ("*")
  std::vector<PatternRef> inputs;
  bool commutative = false; // two inputs that may match in either order
  // Its value may also be read outside the match; it then becomes a further
  // output of the fused kernel (a forward activation saved for backward).
  bool escapes = false;
  Constraints constraints;
};

struct Wildcard {
  std::string name; // with the '$'
  Constraints constraints;
};

struct Pattern {
  std::vector<PatternNode> nodes;
  std::vector<Wildcard> wildcards;
  int root = 0;

  bool opMatches(int node, std::string_view op) const {
    const std::vector<std::string> &ops = nodes[node].ops;
    if (ops.empty())
      return true;
    for (const std::string &o : ops)
      if (o == op)
        return true;
    return false;
  }
  std::string refName(const PatternRef &ref) const {
    return ref.kind == PatternRef::Kind::Node ? nodes[ref.index].id : wildcards[ref.index].name;
  }
};

} // namespace kiln::passes::rules
