#include "passes/precision/setting_matches.h"

#include "passes/pass_context.h"

#include <algorithm>

#include <cstdlib>
#include <map>
#include <set>

#include "ir/layer_scope.h"
#include "support/name_suggest.h"

namespace kiln::passes {

namespace {

// "0-3" or "0, 2, 5" for messages.
std::string layerList(const std::set<int64_t> &layers) {
  if (layers.empty())
    return "none";
  const bool contiguous =
      *layers.rbegin() - *layers.begin() + 1 == static_cast<int64_t>(layers.size());
  if (contiguous && layers.size() > 2)
    return std::to_string(*layers.begin()) + "-" + std::to_string(*layers.rbegin());
  std::string s;
  for (int64_t l : layers)
    s += (s.empty() ? "" : ", ") + std::to_string(l);
  return s;
}

} // namespace

int64_t modelLayerOf(std::string_view name) { return layerWithin(name); }

// The node a pass that runs before the precision passes (FlashAttentionFusionPass,
// before autodiff) fused `name` into, or null.
const Node *fusedInto(const Graph &graph, const std::string &name) {
  for (size_t id = 0; id < graph.numNodes(); ++id) {
    if (graph.isErased(static_cast<NodeId>(id)))
      continue;
    const Node &node = graph.node(static_cast<NodeId>(id));
    const auto &origins = node.provenance.origins;
    if (!node.provenance.pass.empty() &&
        std::find(origins.begin(), origins.end(), name) != origins.end())
      return &node;
  }
  return nullptr;
}

Expected<std::vector<SettingMatch>> matchPrecisionSettings(const Graph &graph,
                                                           const PassContext &ctx) {
  const PassOptions attention = ctx.options(kAttentionFp32CastPassName);
  return matchPrecisionSettings(graph, ctx.precision(), attention.getInts("layers"),
                                attention.source("layers"));
}

Expected<std::vector<SettingMatch>>
matchPrecisionSettings(const Graph &graph, const PrecisionSettings &settings,
                       const std::set<int64_t> &attention_layers,
                       const std::string &attention_source) {
  std::map<std::string, int64_t, std::less<>> per_op;
  std::set<std::string, std::less<>> names;
  std::map<int64_t, int64_t> softmax_per_layer;
  std::set<int64_t> layers;
  for (size_t i = 0; i < graph.numNodes(); ++i) {
    const NodeId id = static_cast<NodeId>(i);
    if (graph.isErased(id))
      continue;
    const Node &node = graph.node(id);
    ++per_op[node.op];
    names.insert(node.name);
    if (const int64_t layer = modelLayerOf(node.name); layer >= 0) {
      layers.insert(layer);
      if (node.op == "Softmax")
        ++softmax_per_layer[layer];
    }
  }
  auto nodesOf = [&](const std::vector<std::string> &ops) {
    int64_t n = 0;
    for (const std::string &op : ops)
      if (auto it = per_op.find(op); it != per_op.end())
        n += it->second;
    return n;
  };

  std::vector<SettingMatch> matches;
  const KeepDType &keep = settings.keep_dtype;
  std::vector<std::string> all_names; // for suggestions, built on the first miss
  for (const KeepDType::Entry &e : keep.entries) {
    SettingMatch m{"keep_dtype", keep.source, e.written, e.ops, 0};
    if (e.op_type) {
      m.nodes = nodesOf(e.ops);
    } else if (names.count(e.written)) {
      m.nodes = 1;
    } else {
      const std::string where = keep.source + ": line " + std::to_string(e.line) + ": ";
      if (const Node *fused = fusedInto(graph, e.written))
        return Error(where + "node '" + e.written + "' was fused into " + fused->op + " '" +
                     fused->name + "' by " + fused->provenance.pass +
                     " before the precision passes run; switch that pass off (--disable-pass " +
                     fused->provenance.pass + ") to set its dtype");
      if (all_names.empty())
        all_names.assign(names.begin(), names.end());
      const std::vector<std::string> near = nearestNames(e.written, all_names);
      return Error(where + "no node named '" + e.written + "' in graph '" + graph.name() + "'" +
                   (near.empty() ? " (kiln graph MODEL --format text lists the node names)"
                                 : " (did you mean " + joinNames(near) + "?)"));
    }
    matches.push_back(std::move(m));
  }

  for (const MixList::Edit &e : settings.mixlist.edits()) {
    const std::string action =
        std::string(precisionListName(e.list)) + "-list " + (e.add ? "to-add" : "to-remove");
    matches.push_back(
        {"modify_mixlist", e.source, action + " " + e.written, e.ops, nodesOf(e.ops)});
  }

  const std::string where = attention_source.empty() || attention_source == "built-in default"
                                ? std::string("attention_fp32_layers")
                                : attention_source;
  for (int64_t layer : attention_layers) {
    if (!layers.count(layer)) {
      std::string hint;
      if (!layers.empty()) {
        int64_t nearest = *layers.begin();
        for (int64_t l : layers)
          if (std::abs(l - layer) < std::abs(nearest - layer))
            nearest = l;
        hint = "; did you mean " + std::to_string(nearest) + "?";
      }
      return Error(where + ": layer " + std::to_string(layer) + " is not in graph '" +
                   graph.name() + "' (its layers: " + layerList(layers) + hint + ")");
    }
    auto it = softmax_per_layer.find(layer);
    matches.push_back({"attention_fp32_layers",
                       where,
                       std::to_string(layer),
                       {"Softmax"},
                       it == softmax_per_layer.end() ? 0 : it->second});
  }
  return matches;
}

} // namespace kiln::passes
