// The data side of mixed precision: which op types may run in low precision
// (white), must keep fp32 (black) or follow their producers (gray), CANN's
// modify_mixlist edits to those lists, and CANN's keep_dtype file.
// docs/precision.md ("Mixlists and keep_dtype") describes the formats.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ir/graph.h"
#include "ops/op_registry.h"
#include "support/error.h"

namespace kiln::passes {

// TensorFlow AMP's allow / deny / infer lists under CANN's names.
enum class PrecisionList : uint8_t {
  White, // may run in low precision (cube ops)
  Black, // keeps fp32 (reductions, exp/log, losses, the optimizer)
  Gray,  // follows its producers
};
std::string_view precisionListName(PrecisionList list); // "white", "black", "gray"

class MixList {
public:
  // Every op type of `registry` on its built-in list: white = MatMul,
  // BatchMatMul; black = Softmax, SoftmaxGrad, ReduceSum, ReduceMean,
  // SumToShape, Rsqrt, RsqrtGrad, Exp, Log, Sqrt, CrossEntropyLoss,
  // CrossEntropyLossGrad, AdamW, RotaryCosSin, EmbeddingGrad; gray = the rest
  // (custom ops included). Built-in names the registry lacks are left out.
  static MixList builtin(const ops::OpRegistry &registry = ops::OpRegistry::builtin());

  // Gray for op types it does not know (a custom op registered later).
  PrecisionList listOf(std::string_view op) const;

  // Applies CANN's modify_mixlist document
  //   {"black-list": {"to-remove": [...], "to-add": [...]}, "white-list": {...},
  //    "gray-list": {...}}
  // to-add moves an op type onto that list (off its old one; already there is
  // no change); to-remove takes it off that list, which makes it gray. Every
  // check is made against the lists before the document, so the order of the
  // document does not matter. Errors, as "<source>: <json path>: what", with
  // the lists unchanged: unknown keys, wrong JSON types, an unknown op type
  // (with the nearest names), removing an op that is not on that list,
  // removing from gray-list (an op off every list is already gray), the same
  // op added to and removed from one list, or added to two lists.
  Status applyEdits(const nlohmann::json &doc, std::string_view source,
                    const ops::OpRegistry &registry = ops::OpRegistry::builtin());

  // Every op type and its list, sorted by op type, for reports and docs.
  std::vector<std::pair<std::string, PrecisionList>> entries() const;

  // One to-add or to-remove entry of an applied document, as written (a
  // kiln or CANN op type, docs/precision.md) with the kiln op types it stands for.
  struct Edit {
    std::string source;  // the file
    std::string path;    // "$.black-list.to-add[0]"
    std::string written; // "SoftmaxV2"
    std::vector<std::string> ops;
    PrecisionList list;
    bool add;
  };
  // The entries of every document applied, in order (for the compile report).
  const std::vector<Edit> &edits() const { return edits_; }

private:
  MixList() = default;
  std::map<std::string, PrecisionList, std::less<>> lists_;
  std::vector<Edit> edits_;
};

// `base` plus the edits of the modify_mixlist file at `path` (global registry).
Expected<MixList> readModifyMixlist(const std::string &path, MixList base,
                                    const ops::OpRegistry &registry = ops::OpRegistry::builtin());

// CANN's keep_dtype file: nodes that keep the dtype the model gave them.
// One entry a line: a node name ("transformer.h.3.attn.softmax") or
// "OpType::Softmax" for every node of an op type (a kiln or a CANN op type:
// OpType::SoftmaxV2, docs/precision.md); blank lines and '#' comments are
// ignored, surrounding spaces trimmed. An unknown op type is an error naming
// the line ("keep.txt: line 3: ..."). Node names cannot be checked here,
// because the graph is not known yet: any name without spaces is taken, and
// missingNodeNames() lists those a graph lacks once it is built
// (passes/precision/setting_matches.h makes that an error).
struct KeepDType {
  struct Entry {
    int line = 0;
    std::string written;          // the line: a node name or "OpType::X"
    bool op_type = false;         // OpType::X
    std::vector<std::string> ops; // the kiln op types of an OpType entry
  };
  std::string source;         // the file, for messages
  std::vector<Entry> entries; // in file order
  std::set<std::string> node_names;
  std::set<std::string> op_types; // kiln op types

  bool keeps(const Node &node) const;
  // The node names of the file that `graph` has no node for, sorted.
  std::vector<std::string> missingNodeNames(const Graph &graph) const;
};

Expected<KeepDType> parseKeepDType(std::string_view text, std::string_view source,
                                   const ops::OpRegistry &registry = ops::OpRegistry::builtin());
Expected<KeepDType> readKeepDType(const std::string &path,
                                  const ops::OpRegistry &registry = ops::OpRegistry::builtin());

} // namespace kiln::passes
