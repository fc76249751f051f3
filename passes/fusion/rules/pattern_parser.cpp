#include "passes/fusion/rules/pattern_parser.h"

#include <algorithm>
#include <map>

#include "passes/fusion/rules/constraint_parser.h"
#include "support/name_suggest.h"

namespace kiln::passes::rules {

using nlohmann::json;

namespace {

Expected<std::vector<std::string>> parseOps(const JsonReader &r, const json &node,
                                            const std::string &path,
                                            const ops::OpRegistry &registry) {
  KILN_ASSIGN_OR_RETURN(const json *op, r.member(node, path, "op"));
  const std::string op_path = JsonReader::child(path, "op");
  std::vector<std::string> names;
  if (op->is_string()) {
    if (op->get<std::string>() == "*")
      return names; // any op
    names.push_back(op->get<std::string>());
  } else if (op->is_array() && !op->empty()) {
    KILN_ASSIGN_OR_RETURN(names, r.stringList(*op, op_path));
  } else {
    return r.error(op_path, "expected an op name, a non-empty list of op names, or \"*\"");
  }
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string where = op->is_array() ? JsonReader::index(op_path, i) : op_path;
    if (names[i] == "*")
      return r.error(where, "\"*\" stands alone, not inside a list");
    if (!registry.find(names[i])) {
      std::vector<std::string> near = nearestNames(names[i], registry.names());
      return r.error(where, "unknown op '" + names[i] + "'" +
                                (near.empty() ? " (see 'kiln ops')"
                                              : " (did you mean " + joinNames(near) + "?)"));
    }
    if (std::count(names.begin(), names.end(), names[i]) > 1)
      return r.error(where, "op '" + names[i] + "' is listed twice");
  }
  return names;
}

// Each listed op must accept as many inputs as the pattern gives it.
Status checkArity(const JsonReader &r, const PatternNode &node, const ops::OpRegistry &registry) {
  for (const std::string &op : node.ops) {
    const ops::OpDef &def = registry.find(op)->def;
    size_t n = node.inputs.size();
    if (n >= def.minInputs() && (!def.maxInputs() || n <= *def.maxInputs()))
      continue;
    std::string expected = std::to_string(def.minInputs());
    if (!def.maxInputs())
      expected += " or more";
    else if (*def.maxInputs() != def.minInputs())
      expected += " to " + std::to_string(*def.maxInputs());
    return r.error(JsonReader::child(node.path, "inputs"),
                   op + " takes " + expected + " input" + (expected == "1" ? "" : "s") +
                       ", the pattern gives it " + std::to_string(n));
  }
  return Status::ok();
}

// Depth-first search; returns the ids along the first cycle found, closed.
bool findCycle(const Pattern &p, int n, std::vector<int> &state, std::vector<int> &stack,
               std::vector<std::string> &cycle) {
  state[n] = 1; // on the stack
  stack.push_back(n);
  for (const PatternRef &in : p.nodes[n].inputs) {
    if (in.kind != PatternRef::Kind::Node)
      continue;
    if (state[in.index] == 1) {
      auto from = std::find(stack.begin(), stack.end(), in.index);
      for (auto it = from; it != stack.end(); ++it)
        cycle.push_back(p.nodes[*it].id);
      cycle.push_back(p.nodes[in.index].id);
      return true;
    }
    if (state[in.index] == 0 && findCycle(p, in.index, state, stack, cycle))
      return true;
  }
  stack.pop_back();
  state[n] = 2; // done
  return false;
}

Status checkGraphShape(const JsonReader &r, const Pattern &p) {
  std::vector<int> state(p.nodes.size(), 0), stack;
  for (size_t n = 0; n < p.nodes.size(); ++n) {
    std::vector<std::string> cycle;
    if (state[n] == 0 && findCycle(p, static_cast<int>(n), state, stack, cycle)) {
      std::string text;
      for (const std::string &id : cycle)
        text += (text.empty() ? "" : " -> ") + id;
      return r.error(p.nodes[n].path, "the pattern has a cycle: " + text);
    }
  }
  std::vector<bool> reached(p.nodes.size(), false);
  std::vector<int> work{p.root};
  reached[p.root] = true;
  while (!work.empty()) {
    int n = work.back();
    work.pop_back();
    for (const PatternRef &in : p.nodes[n].inputs)
      if (in.kind == PatternRef::Kind::Node && !reached[in.index]) {
        reached[in.index] = true;
        work.push_back(in.index);
      }
  }
  for (size_t n = 0; n < p.nodes.size(); ++n)
    if (!reached[n])
      return r.error(p.nodes[n].path, "node '" + p.nodes[n].id +
                                          "' is not reachable from the root '" +
                                          p.nodes[p.root].id + "' (every node must feed the root)");
  return Status::ok();
}

} // namespace

namespace {

// parsePattern's state: the nodes by id and the wildcards by name, known
// once the nodes are read, which the inputs and constraints then name.
class PatternReader {
public:
  PatternReader(const JsonReader &r, const json &pattern, const std::string &path,
                const ops::OpRegistry &registry)
      : r(r), pattern(pattern), path(path), registry(registry) {}

  Expected<Pattern> read() {
    KILN_RETURN_IF_ERROR(r.checkKeys(pattern, path, {"root", "nodes", "wildcards"}));
    nodes_path = JsonReader::child(path, "nodes");
    KILN_ASSIGN_OR_RETURN(nodes, r.array(pattern, path, "nodes"));
    if (nodes->empty())
      return r.error(nodes_path, "a pattern needs at least one node");
    KILN_RETURN_IF_ERROR(readNodes());
    KILN_RETURN_IF_ERROR(readInputs());
    KILN_RETURN_IF_ERROR(readRoot());
    KILN_RETURN_IF_ERROR(readConstraints());
    return std::move(p);
  }

private:
  // Each node's id, ops and flags; its inputs by name, resolved later.
  Status readNodes() {
    for (size_t i = 0; i < nodes->size(); ++i) {
      const json &n = (*nodes)[i];
      PatternNode node;
      node.path = JsonReader::index(nodes_path, i);
      KILN_RETURN_IF_ERROR(r.checkKeys(
          n, node.path, {"id", "op", "inputs", "commutative", "escapes", "constraints"}));
      KILN_ASSIGN_OR_RETURN(node.id, r.string(n, node.path, "id"));
      const std::string id_path = JsonReader::child(node.path, "id");
      if (node.id.empty() || node.id[0] == '$')
        return r.error(id_path, "a node id is a non-empty name not starting with '$' ('$' marks "
                                "wildcards)");
      if (auto [it, fresh] = ids.emplace(node.id, static_cast<int>(i)); !fresh)
        return r.error(id_path,
                       "duplicate id '" + node.id + "' (also at " + p.nodes[it->second].path + ")");
      KILN_ASSIGN_OR_RETURN(node.ops, parseOps(r, n, node.path, registry));
      KILN_ASSIGN_OR_RETURN(const json *inputs, r.array(n, node.path, "inputs"));
      KILN_ASSIGN_OR_RETURN(std::vector<std::string> names,
                            r.stringList(*inputs, JsonReader::child(node.path, "inputs")));
      input_names.push_back(std::move(names));
      for (auto [key, field] :
           {std::pair{"commutative", &node.commutative}, {"escapes", &node.escapes}})
        if (n.contains(key)) {
          KILN_ASSIGN_OR_RETURN(*field, r.boolean(n, node.path, key));
        }
      p.nodes.push_back(std::move(node));
    }

    return Status::ok();
  }

  Status readInputs() {
    // Inputs, now that every id is known; wildcards in order of first use.
    for (size_t i = 0; i < p.nodes.size(); ++i) {
      PatternNode &node = p.nodes[i];
      const std::string inputs_path = JsonReader::child(node.path, "inputs");
      for (size_t k = 0; k < input_names[i].size(); ++k) {
        const std::string &name = input_names[i][k];
        if (name == "$")
          return r.error(JsonReader::index(inputs_path, k), "a wildcard needs a name after '$'");
        if (name[0] == '$') {
          auto [it, fresh] = wildcard_index.emplace(name, static_cast<int>(p.wildcards.size()));
          if (fresh)
            p.wildcards.push_back(Wildcard{name, {}});
          node.inputs.push_back({PatternRef::Kind::Wildcard, it->second});
          continue;
        }
        auto it = ids.find(name);
        if (it == ids.end())
          return r.error(JsonReader::index(inputs_path, k),
                         "input '" + name + "' names no node of the pattern (a wildcard is \"$" +
                             name + "\")");
        node.inputs.push_back({PatternRef::Kind::Node, it->second});
      }
      KILN_RETURN_IF_ERROR(checkArity(r, node, registry));
      if (node.commutative && node.inputs.size() != 2)
        return r.error(JsonReader::child(node.path, "commutative"),
                       "only a node with two inputs can be commutative, '" + node.id + "' has " +
                           std::to_string(node.inputs.size()));
    }

    return Status::ok();
  }

  Status readRoot() {
    KILN_ASSIGN_OR_RETURN(std::string root, r.string(pattern, path, "root"));
    auto root_it = ids.find(root);
    if (root_it == ids.end()) {
      std::vector<std::string> known;
      for (const PatternNode &n : p.nodes)
        known.push_back(n.id);
      return r.error(JsonReader::child(path, "root"),
                     "root '" + root + "' is not the id of a node (ids: " + joinNames(known) + ")");
    }
    p.root = root_it->second;
    if (p.nodes[p.root].escapes)
      return r.error(JsonReader::child(p.nodes[p.root].path, "escapes"),
                     "the root's value always leaves the fused kernel; 'escapes' is for inner "
                     "nodes");
    KILN_RETURN_IF_ERROR(checkGraphShape(r, p));

    return Status::ok();
  }

  Status readConstraints() {
    // Constraints last: same_shape_as may name any node or wildcard.
    RefResolver resolve = [&](const std::string &name) -> std::optional<PatternRef> {
      if (auto w = wildcard_index.find(name); w != wildcard_index.end())
        return PatternRef{PatternRef::Kind::Wildcard, w->second};
      if (auto n = ids.find(name); n != ids.end())
        return PatternRef{PatternRef::Kind::Node, n->second};
      return std::nullopt;
    };
    for (size_t i = 0; i < p.nodes.size(); ++i) {
      PatternNode &node = p.nodes[i];
      KILN_ASSIGN_OR_RETURN(const json *c, r.optionalMember((*nodes)[i], node.path, "constraints"));
      if (!c)
        continue;
      KILN_ASSIGN_OR_RETURN(node.constraints,
                            parseNodeConstraints(r, *c, JsonReader::child(node.path, "constraints"),
                                                 node, registry, resolve));
      if (node.constraints.same_shape_as == PatternRef{PatternRef::Kind::Node, static_cast<int>(i)})
        return r.error(JsonReader::child(node.constraints.path, "same_shape_as"),
                       "a node cannot be compared with itself");
    }
    KILN_ASSIGN_OR_RETURN(const json *wildcards, r.optionalMember(pattern, path, "wildcards"));
    if (wildcards) {
      const std::string w_path = JsonReader::child(path, "wildcards");
      if (!wildcards->is_object())
        return r.error(w_path, "expected an object of \"$name\": {constraints}");
      for (auto it = wildcards->begin(); it != wildcards->end(); ++it) {
        const std::string here = JsonReader::child(w_path, it.key());
        auto w = wildcard_index.find(it.key());
        if (w == wildcard_index.end())
          return r.error(here, "'" + it.key() + "' is not a wildcard used as a node input");
        Wildcard &wc = p.wildcards[w->second];
        KILN_ASSIGN_OR_RETURN(wc.constraints,
                              parseWildcardConstraints(r, it.value(), here, resolve));
        if (wc.constraints.same_shape_as == PatternRef{PatternRef::Kind::Wildcard, w->second})
          return r.error(JsonReader::child(here, "same_shape_as"),
                         "a wildcard cannot be compared with itself");
      }
    }
    return Status::ok();
  }

  const JsonReader &r;
  const json &pattern;
  const std::string &path;
  const ops::OpRegistry &registry;
  std::string nodes_path;
  const json *nodes = nullptr;
  Pattern p;
  std::map<std::string, int> ids;
  std::vector<std::vector<std::string>> input_names;
  std::map<std::string, int> wildcard_index;
};

} // namespace

Expected<Pattern> parsePattern(const JsonReader &r, const json &pattern, const std::string &path,
                               const ops::OpRegistry &registry) {
  return PatternReader(r, pattern, path, registry).read();
}

} // namespace kiln::passes::rules
