#include "passes/precision/mixlist.h"

#include <algorithm>
#include <array>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "passes/precision/cann_op_types.h"
#include "support/file_io.h"
#include "support/json_reader.h"
#include "support/name_suggest.h"
#include "support/text_lines.h"

namespace kiln::passes {

using nlohmann::json;

namespace {

// Cube ops: inputs in fp16/bf16, accumulation in fp32 (docs/ops.md).
constexpr std::array<std::string_view, 2> kWhite = {"MatMul", "BatchMatMul"};
// fp32 where low precision overflows or rounds the answer away.
// clang-format off
constexpr std::array<std::string_view, 23> kBlack = {
    "Softmax", "SoftmaxGrad", "ReduceSum", "ReduceMean", "SumToShape", // reductions
    "ReduceMax", "ReduceMin", "GatherElementsGrad",
    "Rsqrt", "RsqrtGrad", "Sqrt",                                      // norm statistics
    "Exp", "Log", "Pow",
    "CrossEntropyLoss", "CrossEntropyLossGrad",                        // losses
    "VocabParallelMax", "VocabParallelSumExp",
    "VocabParallelCrossEntropy", "VocabParallelCrossEntropyGrad",
    "AdamW",                                                           // optimizer
    "RotaryCosSin",                                                    // f32 tables
    "EmbeddingGrad"};                                                  // sums many rows
// clang-format on

struct ListKey {
  std::string_view key;
  PrecisionList list;
};
// In the order edits are checked, which fixes which of two clashing entries an
// error points at.
constexpr std::array<ListKey, 3> kListKeys = {ListKey{"black-list", PrecisionList::Black},
                                              ListKey{"white-list", PrecisionList::White},
                                              ListKey{"gray-list", PrecisionList::Gray}};

std::string listWords(PrecisionList list) {
  return "the " + std::string(precisionListName(list)) + " list";
}

// JsonReader::checkKeys, plus "did you mean": "black_list" is a likely slip.
Status checkFields(const JsonReader &r, const json &obj, const std::string &path,
                   const std::vector<std::string> &known) {
  if (!obj.is_object())
    return r.error(path, "expected an object");
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (std::find(known.begin(), known.end(), it.key()) != known.end())
      continue;
    std::vector<std::string> near = nearestNames(it.key(), known, 1);
    return r.error(JsonReader::child(path, it.key()),
                   "unknown field (expected one of: " + joinNames(known) + ")" +
                       (near.empty() ? "" : "; did you mean " + near[0] + "?"));
  }
  return Status::ok();
}

struct PendingEdit {
  std::string op; // a kiln op type
  PrecisionList list;
  bool add;
  std::string path;
};

} // namespace

std::string_view precisionListName(PrecisionList list) {
  switch (list) {
  case PrecisionList::White:
    return "white";
  case PrecisionList::Black:
    return "black";
  case PrecisionList::Gray:
    return "gray";
  }
  return "gray";
}

MixList MixList::builtin(const ops::OpRegistry &registry) {
  MixList m;
  for (const std::string &op : registry.names())
    m.lists_[op] = PrecisionList::Gray;
  for (std::string_view op : kWhite)
    if (auto it = m.lists_.find(op); it != m.lists_.end())
      it->second = PrecisionList::White;
  for (std::string_view op : kBlack)
    if (auto it = m.lists_.find(op); it != m.lists_.end())
      it->second = PrecisionList::Black;
  return m;
}

PrecisionList MixList::listOf(std::string_view op) const {
  auto it = lists_.find(op);
  return it == lists_.end() ? PrecisionList::Gray : it->second;
}

Status MixList::applyEdits(const json &doc, std::string_view source,
                           const ops::OpRegistry &registry) {
  JsonReader r(source);
  const std::string root = "$";
  if (!doc.is_object())
    return r.error(root, "expected an object like {\"black-list\": {\"to-add\": [...]}}");
  std::vector<std::string> list_keys;
  for (const ListKey &k : kListKeys)
    list_keys.emplace_back(k.key);
  KILN_RETURN_IF_ERROR(checkFields(r, doc, root, list_keys));

  // Read and check every entry against the lists as they are now.
  std::vector<PendingEdit> edits;
  std::vector<MixList::Edit> entries;
  for (const ListKey &k : kListKeys) {
    KILN_ASSIGN_OR_RETURN(const json *edit, r.optionalMember(doc, root, k.key));
    if (!edit)
      continue;
    const std::string list_path = JsonReader::child(root, k.key);
    if (!edit->is_object())
      return r.error(list_path, "expected an object with \"to-add\" and/or \"to-remove\"");
    KILN_RETURN_IF_ERROR(checkFields(r, *edit, list_path, {"to-add", "to-remove"}));
    for (bool add : {true, false}) {
      const std::string_view action = add ? "to-add" : "to-remove";
      KILN_ASSIGN_OR_RETURN(const json *ops, r.optionalMember(*edit, list_path, action));
      if (!ops)
        continue;
      const std::string ops_path = JsonReader::child(list_path, action);
      KILN_ASSIGN_OR_RETURN(std::vector<std::string> names, r.stringList(*ops, ops_path));
      for (size_t i = 0; i < names.size(); ++i) {
        const std::string where = JsonReader::index(ops_path, i);
        Expected<std::vector<std::string>> ops = resolveOpType(names[i], registry);
        if (!ops)
          return r.error(where, ops.error().message());
        const std::string written = describeOpType(names[i], *ops);
        if (!add && k.list == PrecisionList::Gray)
          return r.error(where, "an op off every list is gray already; to take '" + written +
                                    "' off the gray list, add it to white-list or black-list");
        for (const std::string &op : *ops) {
          const std::string what =
              op == names[i] ? "'" + op + "'" : "'" + op + "' (of CANN's " + names[i] + ")";
          if (!add && listOf(op) != k.list)
            return r.error(where, what + " is not on " + listWords(k.list) + " (it is on " +
                                      listWords(listOf(op)) + ")");
          edits.push_back({op, k.list, add, where});
        }
        entries.push_back({std::string(source), where, names[i], *ops, k.list, add});
      }
    }
  }

  // Entries that contradict each other.
  std::map<std::string, const PendingEdit *> added, removed;
  for (const PendingEdit &e : edits) {
    if (e.add) {
      auto [it, fresh] = added.emplace(e.op, &e);
      if (!fresh && it->second->list != e.list)
        return r.error(e.path, "'" + e.op + "' is also added to " + listWords(it->second->list) +
                                   " at " + it->second->path);
    } else {
      removed.emplace(e.op, &e);
    }
  }
  for (const PendingEdit &e : edits) {
    auto it = removed.find(e.op);
    if (e.add && it != removed.end() && it->second->list == e.list)
      return r.error(it->second->path, "'" + e.op + "' is both removed from and added to " +
                                           listWords(e.list) + " (added at " + e.path + ")");
  }

  for (const PendingEdit &e : edits)
    if (!e.add)
      lists_[e.op] = PrecisionList::Gray;
  for (const PendingEdit &e : edits)
    if (e.add)
      lists_[e.op] = e.list;
  edits_.insert(edits_.end(), entries.begin(), entries.end());
  return Status::ok();
}

std::vector<std::pair<std::string, PrecisionList>> MixList::entries() const {
  return {lists_.begin(), lists_.end()};
}

Expected<MixList> readModifyMixlist(const std::string &path, MixList base,
                                    const ops::OpRegistry &registry) {
  KILN_ASSIGN_OR_RETURN(json doc, readJsonFile(path));
  KILN_RETURN_IF_ERROR(base.applyEdits(doc, path, registry));
  return base;
}

bool KeepDType::keeps(const Node &node) const {
  return node_names.count(node.name) != 0 || op_types.count(node.op) != 0;
}

std::vector<std::string> KeepDType::missingNodeNames(const Graph &graph) const {
  std::unordered_set<std::string_view> present;
  for (size_t i = 0; i < graph.numNodes(); ++i)
    if (!graph.isErased(static_cast<NodeId>(i)))
      present.insert(graph.node(static_cast<NodeId>(i)).name);
  std::vector<std::string> missing;
  for (const std::string &name : node_names)
    if (!present.count(name))
      missing.push_back(name);
  return missing;
}

Expected<KeepDType> parseKeepDType(std::string_view text, std::string_view source,
                                   const ops::OpRegistry &registry) {
  constexpr std::string_view kPrefix = "OpType::";
  KeepDType keep;
  keep.source = std::string(source);
  for (const ContentLine &line : contentLines(text)) {
    const int number = line.number;
    const std::string &entry = line.text;
    const std::string where = std::string(source) + ": line " + std::to_string(number);
    if (entry.find_first_of(" \t") != std::string::npos)
      return Error(where + ": expected one entry a line (a node name or OpType::<op type>), got '" +
                   entry + "'");
    if (entry.starts_with(kPrefix)) {
      const std::string op = entry.substr(kPrefix.size());
      if (op.empty())
        return Error(where + ": 'OpType::' needs an op type, e.g. OpType::Softmax");
      Expected<std::vector<std::string>> ops = resolveOpType(op, registry);
      if (!ops)
        return Error(where + ": " + ops.error().message());
      keep.op_types.insert(ops->begin(), ops->end());
      keep.entries.push_back({number, entry, true, *ops});
      continue;
    }
    // "Optype::Softmax" or "OpType:Softmax" is a misspelt prefix, not a node.
    if (entry.find(':') != std::string::npos)
      return Error(where + ": '" + entry +
                   "' is neither a node name (node names have no ':') nor OpType::<op type>");
    keep.node_names.insert(entry);
    keep.entries.push_back({number, entry, false, {}});
  }
  return keep;
}

Expected<KeepDType> readKeepDType(const std::string &path, const ops::OpRegistry &registry) {
  KILN_ASSIGN_OR_RETURN(std::string text, readFile(path, kMaxJsonFileBytes));
  return parseKeepDType(text, path, registry);
}

} // namespace kiln::passes
