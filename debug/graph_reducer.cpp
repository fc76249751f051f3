#include "debug/graph_reducer.h"

#include <algorithm>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ops/op_registry.h"
#include "ops/op_verifier.h"

namespace kiln::debug {
namespace {

// The outputs a rebuilt graph keeps: the kept ones, plus kept values whose
// readers were all dropped.
std::vector<GraphOutput> keptOutputs(const Graph &graph, const std::set<NodeId> &dropped,
                                     const std::set<size_t> &dropped_outputs) {
  const std::vector<std::vector<NodeId>> users = graph.computeUsers();
  auto kept = [&](ValueId v) {
    const NodeId p = graph.value(v).producer;
    return p == kNoNode || !dropped.count(p);
  };
  std::vector<GraphOutput> outputs;
  std::set<ValueId> output_values;
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    const GraphOutput &out = graph.outputs()[i];
    if (!dropped_outputs.count(i) && kept(out.value)) {
      outputs.push_back(out);
      output_values.insert(out.value);
    }
  }
  for (size_t n = 0; n < graph.numNodes(); ++n) {
    if (dropped.count(static_cast<NodeId>(n)))
      continue;
    for (ValueId v : graph.node(static_cast<NodeId>(n)).outputs) {
      const std::vector<NodeId> &readers = users[v];
      if (readers.empty() || output_values.count(v) ||
          !std::all_of(readers.begin(), readers.end(),
                       [&](NodeId u) { return dropped.count(u) > 0; }))
        continue;
      outputs.push_back({graph.valueName(v), v});
      output_values.insert(v);
    }
  }
  return outputs;
}

// What the kept outputs need, walking back over kept nodes: the live nodes,
// the values a dropped node made that a live one reads (inputs now), and the
// graph inputs still read.
struct Liveness {
  std::vector<bool> live;
  std::set<ValueId> cut, used_inputs;
};
Liveness liveness(const Graph &graph, const std::set<NodeId> &dropped,
                  const std::vector<GraphOutput> &outputs) {
  Liveness l;
  l.live.assign(graph.numNodes(), false);
  std::vector<ValueId> stack;
  for (const GraphOutput &o : outputs)
    stack.push_back(o.value);
  while (!stack.empty()) {
    const ValueId v = stack.back();
    stack.pop_back();
    const NodeId p = graph.value(v).producer;
    if (p == kNoNode) {
      l.used_inputs.insert(v);
    } else if (dropped.count(p)) {
      l.cut.insert(v);
    } else if (!l.live[p]) {
      l.live[p] = true;
      for (ValueId in : graph.node(p).inputs)
        stack.push_back(in);
    }
  }
  return l;
}

// A graph rebuilt from `graph` keeping the nodes not in `dropped`, as the
// header describes; `shrink` (from -> to) re-types the inputs and re-infers
// every node.
Expected<Graph> rebuild(const Graph &graph, const std::set<NodeId> &dropped,
                        const std::set<size_t> &dropped_outputs,
                        std::optional<std::pair<int64_t, int64_t>> shrink) {

  const std::vector<GraphOutput> outputs = keptOutputs(graph, dropped, dropped_outputs);
  if (outputs.empty())
    return Error("no output is left");

  const auto [live, cut, used_inputs] = liveness(graph, dropped, outputs);

  auto shrunk = [&](TensorType type) {
    if (shrink)
      for (int64_t &d : type.shape)
        if (d == shrink->first)
          d = shrink->second;
    return type;
  };
  Graph out(graph.name());
  out.setVocabulary(graph.vocabulary());
  std::unordered_map<ValueId, ValueId> mapped;
  std::set<std::string> input_names;
  for (const GraphInput &in : graph.inputs())
    if (used_inputs.count(in.value)) {
      mapped[in.value] = out.addInput(in.name, shrunk(graph.type(in.value)), in.role);
      input_names.insert(in.name);
    }
  for (ValueId v : cut) {
    std::string name = graph.valueName(v);
    while (input_names.count(name))
      name += "_in";
    input_names.insert(name);
    mapped[v] = out.addInput(name, shrunk(graph.type(v)), InputRole::Data);
  }
  const ops::OpRegistry &registry = ops::opsOf(graph);
  for (size_t n = 0; n < graph.numNodes(); ++n) {
    if (!live[n])
      continue;
    const Node &node = graph.node(static_cast<NodeId>(n));
    std::vector<ValueId> args;
    std::vector<TensorType> arg_types;
    for (ValueId v : node.inputs) {
      args.push_back(mapped.at(v));
      arg_types.push_back(out.type(args.back()));
    }
    std::vector<TensorType> types;
    if (shrink) {
      const ops::RegisteredOp *op = registry.find(node.op);
      if (!op)
        return Error("node '" + node.name + "': unknown op '" + node.op + "'");
      KILN_ASSIGN_OR_RETURN(AttrMap attrs, ops::completeAttrs(op->def, node.attrs, node.name));
      KILN_ASSIGN_OR_RETURN(types, op->impl.infer(arg_types, attrs));
    } else {
      for (ValueId v : node.outputs)
        types.push_back(graph.type(v));
    }
    const NodeId copy = out.addNode(node.op, node.name, args, types, node.attrs, node.provenance);
    for (size_t k = 0; k < node.outputs.size(); ++k)
      mapped[node.outputs[k]] = out.node(copy).outputs[k];
  }
  for (const GraphOutput &o : outputs)
    out.addOutput(o.name, mapped.at(o.value));
  KILN_RETURN_IF_ERROR(ops::verifyGraph(out));
  return out;
}

// Splits [0, n) into `parts` contiguous chunks of nearly equal size.
std::vector<std::pair<size_t, size_t>> chunks(size_t n, size_t parts) {
  std::vector<std::pair<size_t, size_t>> result;
  for (size_t i = 0; i < parts; ++i) {
    const size_t begin = n * i / parts, end = n * (i + 1) / parts;
    if (begin < end)
      result.push_back({begin, end});
  }
  return result;
}

class Reducer {
public:
  Reducer(const ReducePredicate &fails, const ReduceOptions &options)
      : fails_(fails), options_(options) {}

  Expected<ReduceResult> run(const Graph &graph) {
    result_.graph = graph;
    result_.nodes_before = graph.numNodes();
    KILN_ASSIGN_OR_RETURN(bool failing, test(graph));
    if (!failing)
      return Error("the graph does not fail as given: nothing to reduce");
    KILN_RETURN_IF_ERROR(focus());
    // Each edit may enable the others (a dropped output frees nodes, a
    // smaller graph shrinks further): repeat until none changes anything.
    for (bool changed = true; changed && !exhausted();) {
      KILN_ASSIGN_OR_RETURN(bool nodes, ddmin([](const Graph &g) { return g.numNodes(); },
                                              [](const Graph &g, std::vector<size_t> picked) {
                                                std::vector<NodeId> ids(picked.begin(),
                                                                        picked.end());
                                                return dropNodes(g, ids);
                                              },
                                              "dropped"));
      KILN_ASSIGN_OR_RETURN(bool outs, ddmin([](const Graph &g) { return g.outputs().size(); },
                                             dropOutputs, "dropped outputs of"));
      KILN_ASSIGN_OR_RETURN(bool shapes, shrinkShapes());
      changed = nodes || outs || shapes;
    }
    return std::move(result_);
  }

private:
  bool exhausted() const { return result_.trials >= options_.max_trials; }

  Expected<bool> test(const Graph &candidate) {
    ++result_.trials;
    return fails_(candidate);
  }

  // Tries `candidate`; keeps it when it still fails.
  Expected<bool> attempt(Expected<Graph> candidate, const std::string &what) {
    if (!candidate || exhausted())
      return false;
    KILN_ASSIGN_OR_RETURN(bool failing, test(*candidate));
    if (!failing)
      return false;
    result_.graph = std::move(*candidate);
    result_.log.push_back(what + ": " + std::to_string(result_.graph.numNodes()) + " nodes left");
    return true;
  }

  Status focus() {
    if (options_.focus.empty())
      return Status::ok();
    const Graph &g = result_.graph;
    const std::set<std::string> wanted(options_.focus.begin(), options_.focus.end());
    std::vector<NodeId> others;
    bool any = false;
    for (size_t n = 0; n < g.numNodes(); ++n) {
      if (wanted.count(g.node(static_cast<NodeId>(n)).name))
        any = true;
      else
        others.push_back(static_cast<NodeId>(n));
    }
    if (any)
      KILN_RETURN_IF_ERROR(attempt(dropNodes(g, others), "kept only the failing kernel's ops"));
    return Status::ok();
  }

  // ddmin over the items `size` counts, removing chunks with `remove`: the
  // chunk count doubles until single items are tried; every success starts
  // again on the smaller graph.
  template <typename Size, typename Remove>
  Expected<bool> ddmin(Size size, Remove remove, const std::string &verb) {
    bool changed = false;
    size_t parts = 2;
    while (!exhausted()) {
      const size_t n = size(result_.graph);
      if (n == 0)
        break;
      parts = std::min(parts, n);
      bool progress = false;
      for (auto [begin, end] : chunks(n, parts)) {
        std::vector<size_t> picked;
        for (size_t i = begin; i < end; ++i)
          picked.push_back(i);
        KILN_ASSIGN_OR_RETURN(bool kept, attempt(remove(result_.graph, picked),
                                                 verb + " " + std::to_string(picked.size()) +
                                                     " of " + std::to_string(n)));
        if (kept) {
          progress = changed = true;
          parts = std::max<size_t>(parts - 1, 2);
          break;
        }
      }
      if (!progress) {
        if (parts >= n)
          break;
        parts = std::min(parts * 2, n);
      }
    }
    return changed;
  }

  // Each extent of the inputs' shapes: 1, else halved while the failure
  // holds. Smallest first: a halved extent that meets one not yet tried
  // would be shrunk together with it from then on.
  Expected<bool> shrinkShapes() {
    std::set<int64_t> extents;
    for (const GraphInput &in : result_.graph.inputs())
      for (int64_t d : result_.graph.type(in.value).shape)
        if (d > 1)
          extents.insert(d);
    bool changed = false;
    for (int64_t extent : extents) {
      auto label = [&](int64_t to) {
        return "shrank extent " + std::to_string(extent) + " to " + std::to_string(to);
      };
      KILN_ASSIGN_OR_RETURN(bool one, attempt(shrinkExtent(result_.graph, extent, 1), label(1)));
      if (one) {
        changed = true;
        continue;
      }
      for (int64_t current = extent; current / 2 > 1;) {
        KILN_ASSIGN_OR_RETURN(
            bool halved,
            attempt(shrinkExtent(result_.graph, current, current / 2), label(current / 2)));
        if (!halved)
          break;
        changed = true;
        current /= 2;
      }
    }
    return changed;
  }

  const ReducePredicate &fails_;
  const ReduceOptions &options_;
  ReduceResult result_;
};

} // namespace

Expected<Graph> dropNodes(const Graph &graph, const std::vector<NodeId> &nodes) {
  return rebuild(graph, std::set<NodeId>(nodes.begin(), nodes.end()), {}, std::nullopt);
}

Expected<Graph> dropOutputs(const Graph &graph, const std::vector<size_t> &outputs) {
  return rebuild(graph, {}, std::set<size_t>(outputs.begin(), outputs.end()), std::nullopt);
}

Expected<Graph> shrinkExtent(const Graph &graph, int64_t from, int64_t to) {
  if (from == to)
    return Error("the extent is unchanged");
  bool present = false;
  for (const GraphInput &in : graph.inputs())
    for (int64_t d : graph.type(in.value).shape)
      present = present || d == from;
  if (!present)
    return Error("no input has extent " + std::to_string(from));
  return rebuild(graph, {}, {}, std::make_pair(from, to));
}

Expected<ReduceResult> reduceGraph(const Graph &graph, const ReducePredicate &fails,
                                   const ReduceOptions &options) {
  Reducer reducer(fails, options);
  return reducer.run(graph);
}

} // namespace kiln::debug
