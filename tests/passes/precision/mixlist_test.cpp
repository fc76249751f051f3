// The mixed-precision lists: the built-in lists, modify_mixlist edits and
// keep_dtype files, one test per kind of edit and per kind of mistake.
#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "passes/precision/cann_op_types.h"
#include "passes/precision/mixlist.h"
#include "tests/support/pass_test_util.h"

namespace kiln::passes {

// Failures print "black", not "1-byte object <01>" (internal linkage: other
// tests may print lists too).
[[maybe_unused]] static void PrintTo(PrecisionList list, std::ostream *os) {
  *os << precisionListName(list);
}

namespace {

using nlohmann::json;
using Lists = std::map<std::string, PrecisionList>;

const std::string kData = std::string(KILN_SOURCE_DIR) + "/tests/passes/precision/data";

std::string readText(const std::string &path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Lists listsOf(const MixList &m) {
  Lists out;
  for (const auto &[op, list] : m.entries())
    out[op] = list;
  return out;
}

// The ops whose list differs between `a` and `b`, with their list in `b`.
Lists changed(const MixList &a, const MixList &b) {
  Lists before = listsOf(a), after = listsOf(b), out;
  for (const auto &[op, list] : after)
    if (!before.count(op) || before.at(op) != list)
      out[op] = list;
  return out;
}

// The message of applying `doc` read from "mix.json" to the built-in lists,
// empty when it applies; the lists must be unchanged after an error.
std::string editError(const std::string &doc) {
  MixList m = MixList::builtin();
  Status s = m.applyEdits(json::parse(doc), "mix.json");
  if (s)
    return "";
  EXPECT_EQ(listsOf(m), listsOf(MixList::builtin())) << "an error left the lists edited";
  return s.message();
}

#define EXPECT_EDIT_ERROR(doc, fragment)                                                           \
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, fragment, editError(doc))

TEST(MixList, ListNames) {
  EXPECT_EQ(precisionListName(PrecisionList::White), "white");
  EXPECT_EQ(precisionListName(PrecisionList::Black), "black");
  EXPECT_EQ(precisionListName(PrecisionList::Gray), "gray");
}

TEST(MixList, BuiltinCoversEveryRegisteredOpOnce) {
  const ops::OpRegistry &registry = ops::OpRegistry::builtin();
  auto entries = MixList::builtin().entries();
  std::vector<std::string> ops;
  for (const auto &e : entries)
    ops.push_back(e.first);
  EXPECT_EQ(ops, registry.names()); // both sorted: each op exactly once, nothing else
}

TEST(MixList, BuiltinListsAreTheDocumentedOnes) {
  const std::vector<std::string> white = {"MatMul", "BatchMatMul"};
  const std::vector<std::string> black = {"Softmax",
                                          "SoftmaxGrad",
                                          "ReduceSum",
                                          "ReduceMean",
                                          "SumToShape",
                                          "Rsqrt",
                                          "RsqrtGrad",
                                          "Exp",
                                          "Log",
                                          "Sqrt",
                                          "AdamW",
                                          "RotaryCosSin",
                                          "CrossEntropyLoss",
                                          "CrossEntropyLossGrad",
                                          "VocabParallelMax",
                                          "VocabParallelSumExp",
                                          "VocabParallelCrossEntropy",
                                          "VocabParallelCrossEntropyGrad",
                                          "EmbeddingGrad",
                                          "ReduceMax",
                                          "ReduceMin",
                                          "GatherElementsGrad",
                                          "Pow"};
  MixList m = MixList::builtin();
  for (const std::string &op : white) {
    ASSERT_NE(ops::OpRegistry::builtin().find(op), nullptr) << op;
    EXPECT_EQ(m.listOf(op), PrecisionList::White) << op;
  }
  for (const std::string &op : black) {
    ASSERT_NE(ops::OpRegistry::builtin().find(op), nullptr) << op;
    EXPECT_EQ(m.listOf(op), PrecisionList::Black) << op;
  }
  for (const auto &[op, list] : m.entries()) {
    bool named =
        std::count(white.begin(), white.end(), op) + std::count(black.begin(), black.end(), op) > 0;
    if (!named) {
      EXPECT_EQ(list, PrecisionList::Gray) << op;
    }
  }
}

// The lists follow from op kinds: every reduction keeps fp32, every cube op is white.
TEST(MixList, BuiltinListsAgreeWithOpKinds) {
  MixList m = MixList::builtin();
  for (const std::string &op : ops::OpRegistry::builtin().names()) {
    ops::OpKind kind = ops::OpRegistry::builtin().find(op)->def.kind;
    if (kind == ops::OpKind::Reduce) {
      EXPECT_EQ(m.listOf(op), PrecisionList::Black) << op;
    }
    if (kind == ops::OpKind::OutElemwiseFusable) {
      EXPECT_EQ(m.listOf(op), PrecisionList::White) << op;
    }
  }
}

TEST(MixList, UnknownAndCustomOpsAreGray) {
  EXPECT_EQ(MixList::builtin().listOf("NoSuchOp"), PrecisionList::Gray);
  ops::OpRegistry registry;
  ASSERT_TRUE(registry.add(ops::OpDef{.name = "MatMul"}, ops::OpImpl{}));
  ASSERT_TRUE(registry.add(ops::OpDef{.name = "MyCustomOp"}, ops::OpImpl{}));
  MixList m = MixList::builtin(registry);
  EXPECT_EQ(listsOf(m),
            (Lists{{"MatMul", PrecisionList::White}, {"MyCustomOp", PrecisionList::Gray}}));
  // Edits check op types against the registry they are given.
  ASSERT_TRUE(m.applyEdits(json::parse(R"({"black-list": {"to-add": ["MyCustomOp"]}})"), "mix.json",
                           registry));
  EXPECT_EQ(m.listOf("MyCustomOp"), PrecisionList::Black);
}

TEST(MixList, ToAddMovesOffTheOldList) {
  MixList base = MixList::builtin(), m = base;
  ASSERT_TRUE(m.applyEdits(json::parse(R"({"black-list": {"to-add": ["BatchMatMul", "Silu"]}})"),
                           "mix.json"));
  EXPECT_EQ(changed(base, m),
            (Lists{{"BatchMatMul", PrecisionList::Black}, {"Silu", PrecisionList::Black}}));

  m = base;
  ASSERT_TRUE(
      m.applyEdits(json::parse(R"({"white-list": {"to-add": ["Exp", "Gather"]}})"), "mix.json"));
  EXPECT_EQ(changed(base, m),
            (Lists{{"Exp", PrecisionList::White}, {"Gather", PrecisionList::White}}));

  m = base;
  ASSERT_TRUE(
      m.applyEdits(json::parse(R"({"gray-list": {"to-add": ["Sqrt", "MatMul"]}})"), "mix.json"));
  EXPECT_EQ(changed(base, m),
            (Lists{{"Sqrt", PrecisionList::Gray}, {"MatMul", PrecisionList::Gray}}));
}

TEST(MixList, ToAddOfAnOpAlreadyThereChangesNothing) {
  MixList base = MixList::builtin(), m = base;
  ASSERT_TRUE(m.applyEdits(json::parse(R"({"black-list": {"to-add": ["Exp", "Exp"]},
                                           "gray-list": {"to-add": ["Add"]}})"),
                           "mix.json"));
  EXPECT_EQ(changed(base, m), Lists{});
}

TEST(MixList, ToRemoveMakesGray) {
  MixList base = MixList::builtin(), m = base;
  ASSERT_TRUE(m.applyEdits(json::parse(R"({"black-list": {"to-remove": ["Sqrt", "Log"]},
                                           "white-list": {"to-remove": ["BatchMatMul"]}})"),
                           "mix.json"));
  EXPECT_EQ(changed(base, m), (Lists{{"Sqrt", PrecisionList::Gray},
                                     {"Log", PrecisionList::Gray},
                                     {"BatchMatMul", PrecisionList::Gray}}));
}

TEST(MixList, RemoveFromOneListAndAddToAnother) {
  MixList base = MixList::builtin(), m = base;
  ASSERT_TRUE(m.applyEdits(json::parse(R"({"white-list": {"to-remove": ["BatchMatMul"]},
                                           "black-list": {"to-add": ["BatchMatMul"]}})"),
                           "mix.json"));
  EXPECT_EQ(changed(base, m), (Lists{{"BatchMatMul", PrecisionList::Black}}));
}

TEST(MixList, EmptyDocumentAndEmptyListsChangeNothing) {
  MixList base = MixList::builtin(), m = base;
  ASSERT_TRUE(m.applyEdits(json::object(), "mix.json"));
  ASSERT_TRUE(m.applyEdits(
      json::parse(R"({"black-list": {}, "white-list": {"to-add": [], "to-remove": []}})"),
      "mix.json"));
  EXPECT_EQ(changed(base, m), Lists{});
}

// Checks see the lists before the document, so a later edit cannot make an
// earlier one valid: Silu is gray, not black, whatever white-list says.
TEST(MixList, ChecksUseTheListsBeforeTheDocument) {
  EXPECT_EDIT_ERROR(R"({"white-list": {"to-add": ["Silu"]},
                        "black-list": {"to-remove": ["Silu"]}})",
                    "mix.json: $.black-list.to-remove[0]: 'Silu' is not on the black list (it is "
                    "on the gray list)");
}

TEST(MixList, ReadsTheExampleFile) {
  auto m = readModifyMixlist(kData + "/modify_mixlist.json", MixList::builtin());
  ASSERT_TRUE(m) << m.message();
  EXPECT_EQ(changed(MixList::builtin(), *m), (Lists{{"BatchMatMul", PrecisionList::Black},
                                                    {"Silu", PrecisionList::Black},
                                                    {"Sqrt", PrecisionList::Gray},
                                                    {"Gather", PrecisionList::White},
                                                    {"RsqrtGrad", PrecisionList::Gray}}));
}

TEST(MixList, EditsStackOnTheBase) {
  MixList base = MixList::builtin();
  ASSERT_TRUE(base.applyEdits(json::parse(R"({"white-list": {"to-add": ["Silu"]}})"), "job.json"));
  auto m = readModifyMixlist(kData + "/modify_mixlist.json", base);
  ASSERT_TRUE(m) << m.message();
  EXPECT_EQ(m->listOf("Silu"), PrecisionList::Black); // the file moved it from white
  EXPECT_EQ(m->listOf("Gather"), PrecisionList::White);
}

TEST(MixList, FileErrorsNameTheFile) {
  auto bad = readModifyMixlist(kData + "/bad_op.json", MixList::builtin());
  ASSERT_FALSE(bad);
  EXPECT_PRED_FORMAT2(::testing::IsSubstring,
                      kData + "/bad_op.json: $.black-list.to-add[0]: unknown op type 'Softmx' "
                              "(did you mean Softmax?)",
                      bad.message());
  auto truncated = readModifyMixlist(kData + "/truncated.json", MixList::builtin());
  ASSERT_FALSE(truncated);
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, kData + "/truncated.json", truncated.message());
  auto missing = readModifyMixlist(kData + "/no_such_file.json", MixList::builtin());
  ASSERT_FALSE(missing);
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, kData + "/no_such_file.json: cannot open",
                      missing.message());
}

TEST(MixList, UnknownOpTypeSuggestsNearest) {
  EXPECT_EDIT_ERROR(R"({"white-list": {"to-add": ["MatMul", "BatchMatmul"]}})",
                    "mix.json: $.white-list.to-add[1]: unknown op type 'BatchMatmul' (did you "
                    "mean BatchMatMul?)");
  EXPECT_EDIT_ERROR(R"({"gray-list": {"to-add": ["Softmx"]}})",
                    "mix.json: $.gray-list.to-add[0]: unknown op type 'Softmx' (did you mean "
                    "Softmax?)");
  EXPECT_EDIT_ERROR(R"({"black-list": {"to-remove": ["LayerNormalization"]}})",
                    "mix.json: $.black-list.to-remove[0]: unknown op type 'LayerNormalization' "
                    "(see 'kiln ops' and the CANN op types in docs/precision.md)");
}

// CANN's op type names read as kiln's ops (docs/precision.md, "CANN op types").
TEST(MixList, CannOpTypesMapOntoKilnOps) {
  MixList m = MixList::builtin();
  ASSERT_TRUE(
      m.applyEdits(json::parse(R"({"white-list": {"to-remove": ["MatMulV2", "BatchMatMulV2"]},
                                           "black-list": {"to-remove": ["SoftmaxV2"]},
                                           "gray-list": {"to-add": ["RmsNorm"]}})"),
                   "mix.json"))
      << "CANN's names are accepted";
  EXPECT_EQ(changed(MixList::builtin(), m), (Lists{{"MatMul", PrecisionList::Gray},
                                                   {"BatchMatMul", PrecisionList::Gray},
                                                   {"Softmax", PrecisionList::Gray},
                                                   {"ReduceMean", PrecisionList::Gray},
                                                   {"Rsqrt", PrecisionList::Gray}}));
  ASSERT_EQ(m.edits().size(), 4u);
  EXPECT_EQ(m.edits()[0].written, "SoftmaxV2") << "black-list comes first, then white, gray";
  EXPECT_EQ(m.edits()[0].ops, std::vector<std::string>{"Softmax"});
  EXPECT_EQ(m.edits()[3].written, "RmsNorm");
  EXPECT_EQ(m.edits()[3].ops, (std::vector<std::string>{"ReduceMean", "Rsqrt"}));
  EXPECT_EDIT_ERROR(R"({"white-list": {"to-remove": ["SoftmaxV2"]}})",
                    "mix.json: $.white-list.to-remove[0]: 'Softmax' (of CANN's SoftmaxV2) is not "
                    "on the white list (it is on the black list)");
  EXPECT_EDIT_ERROR(R"({"white-list": {"to-add": ["RmsNrom"]}})",
                    "mix.json: $.white-list.to-add[0]: unknown op type 'RmsNrom' (did you mean "
                    "RmsNorm");
  EXPECT_EDIT_ERROR(R"({"white-list": {"to-add": ["BatchMatmul"]}})",
                    "unknown op type 'BatchMatmul' (did you mean BatchMatMul?)");
}

TEST(CannOpTypes, EveryEntryNamesKilnOps) {
  for (const CannOpType &t : cannOpTypes()) {
    EXPECT_FALSE(ops::OpRegistry::builtin().find(std::string(t.cann)))
        << t.cann << " is a kiln op already: no entry needed";
    for (std::string_view op : t.kiln)
      EXPECT_TRUE(ops::OpRegistry::builtin().find(std::string(op))) << t.cann << " -> " << op;
    auto resolved = resolveOpType(t.cann);
    ASSERT_TRUE(resolved) << resolved.message();
    EXPECT_EQ(resolved->size(), t.kiln.size());
  }
  auto same = resolveOpType("Softmax");
  ASSERT_TRUE(same);
  EXPECT_EQ(*same, std::vector<std::string>{"Softmax"});
}

TEST(MixList, RemovingAnOpNotOnTheList) {
  EXPECT_EDIT_ERROR(R"({"white-list": {"to-remove": ["Softmax"]}})",
                    "mix.json: $.white-list.to-remove[0]: 'Softmax' is not on the white list (it "
                    "is on the black list)");
  EXPECT_EDIT_ERROR(R"({"black-list": {"to-remove": ["Exp", "Add"]}})",
                    "mix.json: $.black-list.to-remove[1]: 'Add' is not on the black list (it is "
                    "on the gray list)");
}

TEST(MixList, RemovingFromGrayIsAnError) {
  EXPECT_EDIT_ERROR(R"({"gray-list": {"to-remove": ["Add"]}})",
                    "mix.json: $.gray-list.to-remove[0]: an op off every list is gray already; to "
                    "take 'Add' off the gray list, add it to white-list or black-list");
}

TEST(MixList, AddingAndRemovingTheSameOp) {
  EXPECT_EDIT_ERROR(R"({"black-list": {"to-add": ["Exp"], "to-remove": ["Log", "Exp"]}})",
                    "mix.json: $.black-list.to-remove[1]: 'Exp' is both removed from and added to "
                    "the black list (added at $.black-list.to-add[0])");
}

TEST(MixList, AddingToTwoLists) {
  EXPECT_EDIT_ERROR(R"({"white-list": {"to-add": ["Silu"]}, "black-list": {"to-add": ["Silu"]}})",
                    "mix.json: $.white-list.to-add[0]: 'Silu' is also added to the black list at "
                    "$.black-list.to-add[0]");
}

TEST(MixList, UnknownKeys) {
  EXPECT_EDIT_ERROR(R"({"black_list": {"to-add": ["Silu"]}})",
                    "mix.json: $.black_list: unknown field (expected one of: black-list, "
                    "white-list, gray-list); did you mean black-list?");
  EXPECT_EDIT_ERROR(R"({"white-list": {"to_add": ["Silu"]}})",
                    "mix.json: $.white-list.to_add: unknown field (expected one of: to-add, "
                    "to-remove); did you mean to-add?");
  EXPECT_EDIT_ERROR(R"({"Switch": {}})",
                    "mix.json: $.Switch: unknown field (expected one of: black-list, white-list, "
                    "gray-list)");
}

TEST(MixList, WrongJsonTypes) {
  EXPECT_EDIT_ERROR(R"(["Silu"])", "mix.json: $: expected an object like {\"black-list\"");
  EXPECT_EDIT_ERROR(R"({"black-list": ["Silu"]})",
                    "mix.json: $.black-list: expected an object with \"to-add\" and/or "
                    "\"to-remove\"");
  EXPECT_EDIT_ERROR(R"({"black-list": {"to-add": "Silu"}})",
                    "mix.json: $.black-list.to-add: expected an array of strings");
  EXPECT_EDIT_ERROR(R"({"black-list": {"to-add": ["Silu", 3]}})",
                    "mix.json: $.black-list.to-add[1]: expected a string");
}

TEST(KeepDType, ParsesNodesAndOpTypes) {
  auto keep = parseKeepDType("# comment\n"
                             "\n"
                             "transformer.h.3.attn.softmax\n"
                             "  OpType::Exp  # trailing comment\r\n"
                             "\t\n"
                             "lm_head\n"
                             "OpType::Exp\n",
                             "keep.txt");
  ASSERT_TRUE(keep) << keep.message();
  EXPECT_EQ(keep->node_names, (std::set<std::string>{"transformer.h.3.attn.softmax", "lm_head"}));
  EXPECT_EQ(keep->op_types, (std::set<std::string>{"Exp"}));
}

TEST(KeepDType, EmptyFileKeepsNothing) {
  auto keep = parseKeepDType("# nothing\n\n", "keep.txt");
  ASSERT_TRUE(keep) << keep.message();
  EXPECT_TRUE(keep->node_names.empty());
  EXPECT_TRUE(keep->op_types.empty());
}

TEST(KeepDType, KeepsByNameAndByOpType) {
  auto keep = parseKeepDType("transformer.h.3.attn.scores\nOpType::Softmax\n", "keep.txt");
  ASSERT_TRUE(keep) << keep.message();
  EXPECT_TRUE(keep->keeps(Node{.op = "BatchMatMul", .name = "transformer.h.3.attn.scores"}));
  EXPECT_FALSE(keep->keeps(Node{.op = "BatchMatMul", .name = "transformer.h.4.attn.scores"}));
  EXPECT_TRUE(keep->keeps(Node{.op = "Softmax", .name = "transformer.h.9.attn.softmax"}));
  EXPECT_FALSE(keep->keeps(Node{.op = "SoftmaxGrad", .name = "transformer.h.9.attn.softmax.grad"}));
  EXPECT_FALSE(keep->keeps(Node{.op = "Add", .name = "transformer.h.3.attn"})); // no prefix match
}

// The example file names nodes of the real model; on the tiny training step
// it keeps exactly the named node and every Softmax and SoftmaxGrad.
TEST(KeepDType, ExampleFileOnTheTinyTrainingStep) {
  auto keep = readKeepDType(kData + "/keep_dtype.txt");
  ASSERT_TRUE(keep) << keep.message();
  Graph graph = kiln::testing::tinyTrainingStep(DType::F16).graph;
  EXPECT_EQ(keep->missingNodeNames(graph), std::vector<std::string>{});
  size_t kept = 0, softmaxes = 0;
  for (const Node &node : graph.nodes()) {
    bool is_softmax = node.op == "Softmax" || node.op == "SoftmaxGrad";
    softmaxes += is_softmax;
    kept += keep->keeps(node);
    EXPECT_EQ(keep->keeps(node), is_softmax || node.name == "transformer.h.0.attn.scores")
        << node.name;
  }
  EXPECT_GT(softmaxes, 0u);
  EXPECT_EQ(kept, softmaxes + 1);
}

TEST(KeepDType, MissingNodeNames) {
  auto keep = parseKeepDType("transformer.h.0.attn.scores\ntransformer.h.99.attn.scores\n"
                             "OpType::Softmax\n",
                             "keep.txt");
  ASSERT_TRUE(keep) << keep.message();
  Graph graph = kiln::testing::tinyTrainingStep(DType::F16).graph;
  EXPECT_EQ(keep->missingNodeNames(graph),
            std::vector<std::string>{"transformer.h.99.attn.scores"});
}

std::string keepError(std::string_view text) {
  auto keep = parseKeepDType(text, "keep.txt");
  return keep ? std::string() : keep.message();
}

#define EXPECT_KEEP_ERROR(text, fragment)                                                          \
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, fragment, keepError(text))

TEST(KeepDType, CannOpTypes) {
  auto keep = parseKeepDType("OpType::SoftmaxV2\nOpType::MatMulV2\nlm_head\n", "keep.txt");
  ASSERT_TRUE(keep) << keep.message();
  EXPECT_EQ(keep->op_types, (std::set<std::string>{"Softmax", "MatMul"}));
  EXPECT_TRUE(keep->keeps(Node{.op = "Softmax", .name = "transformer.h.0.attn.softmax"}));
  ASSERT_EQ(keep->entries.size(), 3u);
  EXPECT_EQ(keep->entries[0].written, "OpType::SoftmaxV2");
  EXPECT_EQ(keep->entries[0].line, 1);
  EXPECT_EQ(keep->entries[2].op_type, false);
  EXPECT_EQ(keep->source, "keep.txt");
}

TEST(KeepDType, UnknownOpTypeNamesTheLine) {
  EXPECT_KEEP_ERROR("# keep\nlm_head\n\nOpType::Softmx\n",
                    "keep.txt: line 4: unknown op type 'Softmx' (did you mean Softmax?)");
  EXPECT_KEEP_ERROR("OpType::LayerNormalization\n",
                    "keep.txt: line 1: unknown op type 'LayerNormalization' (see 'kiln ops' and "
                    "the CANN op types in docs/precision.md)");
  EXPECT_KEEP_ERROR("OpType::\n", "keep.txt: line 1: 'OpType::' needs an op type, e.g. "
                                  "OpType::Softmax");
}

TEST(KeepDType, MalformedLines) {
  EXPECT_KEEP_ERROR("a\nh.0.attn.scores h.1.attn.scores\n",
                    "keep.txt: line 2: expected one entry a line (a node name or "
                    "OpType::<op type>), got 'h.0.attn.scores h.1.attn.scores'");
  EXPECT_KEEP_ERROR("Optype::Softmax\n", "keep.txt: line 1: 'Optype::Softmax' is neither a node "
                                         "name (node names have no ':') nor OpType::<op type>");
  EXPECT_KEEP_ERROR("OpType:Softmax\n", "keep.txt: line 1: 'OpType:Softmax' is neither");
}

TEST(KeepDType, FileErrorsNameTheFile) {
  auto missing = readKeepDType(kData + "/no_such_file.txt");
  ASSERT_FALSE(missing);
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, kData + "/no_such_file.txt: cannot open",
                      missing.message());
}

// docs/precision.md shows the built-in lists and the example files as they are.
TEST(MixList, DocsMatchTheLists) {
  const std::string doc = readText(std::string(KILN_SOURCE_DIR) + "/docs/precision.md");
  ASSERT_FALSE(doc.empty());
  for (const auto &[op, list] : MixList::builtin().entries()) {
    const std::string row = "| " + op + " | " + std::string(precisionListName(list)) + " |";
    EXPECT_NE(doc.find(row), std::string::npos) << "docs/precision.md lacks the row " << row;
  }
  EXPECT_NE(doc.find(readText(kData + "/modify_mixlist.json")), std::string::npos)
      << "docs/precision.md should show tests/passes/precision/data/modify_mixlist.json";
  EXPECT_NE(doc.find(readText(kData + "/keep_dtype.txt")), std::string::npos)
      << "docs/precision.md should show tests/passes/precision/data/keep_dtype.txt";
  for (const CannOpType &t : cannOpTypes()) {
    std::string ops;
    for (std::string_view op : t.kiln)
      ops += (ops.empty() ? "" : ", ") + std::string(op);
    const std::string row = "| " + std::string(t.cann) + " | " + ops + " |";
    EXPECT_NE(doc.find(row), std::string::npos) << "docs/precision.md lacks the row " << row;
  }
}

} // namespace
} // namespace kiln::passes
