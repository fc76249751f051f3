// Graph JSON: exact round trips (special floats, provenance, multi-output values)
// and errors that name the JSON path of the problem.
#include <cmath>
#include <functional>
#include <limits>

#include <gtest/gtest.h>

#include "formats/graph_json.h"
#include "ir/printer.h"

namespace kiln {
namespace {

using nlohmann::json;

constexpr double kInf = std::numeric_limits<double>::infinity();

Graph buildSample() {
  Graph g("sample");
  ValueId ids = g.addInput("input_ids", {DType::I64, {1, 16}}, InputRole::Data);
  ValueId wte = g.addInput("wte.weight", {DType::F16, {100, 8}}, InputRole::Parameter);
  ValueId m = g.addInput("wte.weight.m", {DType::F32, {100, 8}}, InputRole::OptimizerState);
  ValueId lr = g.addInput("lr", {DType::F32, {}}, InputRole::Hyperparameter);
  NodeId emb = g.addNode("Gather", "wte", {wte, ids}, {{DType::F16, {1, 16, 8}}},
                         {{"axis", int64_t{0}}}, Provenance{"frontend", {"model.embed_tokens"}});
  NodeId split = g.addNode("Split", "h.0.split", {g.node(emb).outputs[0]},
                           {{DType::F16, {1, 16, 4}}, {DType::F16, {1, 16, 4}}},
                           {{"axis", int64_t{-1}},
                            {"sizes", std::vector<int64_t>{4, 4}},
                            {"big", std::vector<int64_t>{std::numeric_limits<int64_t>::min(),
                                                         std::numeric_limits<int64_t>::max()}},
                            {"eps", 1e-6},
                            {"tiny", std::numeric_limits<double>::denorm_min()},
                            {"huge", std::numeric_limits<double>::max()},
                            {"tenth", 0.1},
                            {"neg_zero", -0.0},
                            {"pinf", kInf},
                            {"ninf", -kInf},
                            {"nan", std::nan("")},
                            {"list", std::vector<double>{kInf, -kInf, std::nan(""), 0.5}},
                            {"flag", false},
                            {"mode", std::string("nan")}, // a string, not a float
                            {"label", std::string("quote \" backslash \\ unicode \xc3\xa9")},
                            {"acc", DType::BF16}},
                           Provenance{"TbeSplitFusionPass", {"h.0.a", "h.0.b"}});
  ValueId s1 = g.node(split).outputs[1];
  NodeId upd = g.addNode("Update", "opt.update", {m, lr, g.node(split).outputs[0]},
                         {{DType::F32, {100, 8}}}, {}, Provenance{"", {"orphan.origin"}});
  g.addNode("Sink", "sink", {s1}, {});
  g.addOutput("hidden", s1);
  g.addOutput("m.new", g.node(upd).outputs[0]);
  return g;
}

TEST(GraphJson, RoundTripKeepsTextAndJson) {
  Graph g = buildSample();
  const json j = graphToJson(g);
  auto back = parseGraphJson(j.dump(2), "sample.json");
  ASSERT_TRUE(back.isOk()) << back.message();
  PrintOptions prov{true};
  EXPECT_EQ(graphToText(*back, prov), graphToText(g, prov));
  EXPECT_EQ(graphToJson(*back), j);
  // Compact output reads back the same.
  auto compact = parseGraphJson(j.dump(), "sample.json");
  ASSERT_TRUE(compact.isOk()) << compact.message();
  EXPECT_EQ(graphToJson(*compact), j);
}

TEST(GraphJson, RoundTripKeepsValuesExactly) {
  Graph g = buildSample();
  auto back = parseGraphJson(graphToJson(g).dump(), "sample.json");
  ASSERT_TRUE(back.isOk()) << back.message();
  const Node &split = back->node(back->findNode("h.0.split"));
  const AttrMap &a = split.attrs;
  EXPECT_EQ(a.size(), g.node(g.findNode("h.0.split")).attrs.size());
  EXPECT_EQ(a.getInts("big"), (std::vector<int64_t>{std::numeric_limits<int64_t>::min(),
                                                    std::numeric_limits<int64_t>::max()}));
  EXPECT_EQ(a.getFloat("eps"), 1e-6);
  EXPECT_EQ(a.getFloat("tiny"), std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(a.getFloat("huge"), std::numeric_limits<double>::max());
  EXPECT_EQ(a.getFloat("tenth"), 0.1);
  EXPECT_EQ(a.getFloat("neg_zero"), 0.0);
  EXPECT_TRUE(std::signbit(a.getFloat("neg_zero")));
  EXPECT_EQ(a.getFloat("pinf"), kInf);
  EXPECT_EQ(a.getFloat("ninf"), -kInf);
  EXPECT_TRUE(std::isnan(a.getFloat("nan")));
  const auto &list = a.getFloats("list");
  ASSERT_EQ(list.size(), 4u);
  EXPECT_EQ(list[0], kInf);
  EXPECT_EQ(list[1], -kInf);
  EXPECT_TRUE(std::isnan(list[2]));
  EXPECT_EQ(list[3], 0.5);
  EXPECT_EQ(a.getString("mode"), "nan");
  EXPECT_EQ(a.getString("label"), "quote \" backslash \\ unicode \xc3\xa9");
  EXPECT_EQ(a.getDType("acc"), DType::BF16);
  EXPECT_FALSE(a.getBool("flag"));
  EXPECT_EQ(split.provenance, (Provenance{"TbeSplitFusionPass", {"h.0.a", "h.0.b"}}));
  EXPECT_EQ(back->node(back->findNode("opt.update")).provenance,
            (Provenance{"", {"orphan.origin"}}));
  EXPECT_EQ(back->node(back->findNode("sink")).provenance, Provenance{});
  // Multi-output values keep their identity.
  const GraphOutput *hidden = back->findOutput("hidden");
  ASSERT_NE(hidden, nullptr);
  EXPECT_EQ(back->valueName(hidden->value), "h.0.split#1");
  EXPECT_EQ(back->inputs()[2].role, InputRole::OptimizerState);
  EXPECT_EQ(back->inputs()[3].role, InputRole::Hyperparameter);
  EXPECT_EQ(back->type(back->inputs()[3].value), (TensorType{DType::F32, {}}));
}

TEST(GraphJson, WritesTheDocumentedLayout) {
  const json j = graphToJson(buildSample());
  EXPECT_EQ(j["format"], "kiln.graph");
  EXPECT_EQ(j["version"], kGraphJsonVersion);
  EXPECT_EQ(j["inputs"][0],
            (json{{"name", "input_ids"}, {"dtype", "i64"}, {"shape", {1, 16}}, {"role", "data"}}));
  const json &split = j["nodes"][1];
  EXPECT_EQ(split["inputs"], json::array({"wte"}));
  EXPECT_EQ(split["attrs"]["pinf"], (json{{"float", "inf"}}));
  EXPECT_EQ(split["attrs"]["mode"], (json{{"string", "nan"}}));
  EXPECT_EQ(split["attrs"]["acc"], (json{{"dtype", "bf16"}}));
  EXPECT_EQ(j["nodes"][2]["inputs"], (json{"wte.weight.m", "lr", "h.0.split#0"}));
  EXPECT_EQ(j["outputs"][0], (json{{"name", "hidden"}, {"value", "h.0.split#1"}}));
  EXPECT_FALSE(j["nodes"][3].contains("provenance"));
}

// --- errors ----------------------------------------------------------------

// x -> Relu "r" -> Split "s" (two outputs); output y = s#1.
json smallJson() {
  return json::parse(R"({
    "format": "kiln.graph", "version": 1, "name": "small",
    "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 4], "role": "data"}],
    "nodes": [
      {"op": "Relu", "name": "r", "inputs": ["x"], "outputs": [{"dtype": "f32", "shape": [2, 4]}],
       "attrs": {"alpha": {"float": 0.5}}},
      {"op": "Split", "name": "s", "inputs": ["r"],
       "outputs": [{"dtype": "f32", "shape": [2, 2]}, {"dtype": "f32", "shape": [2, 2]}]}
    ],
    "outputs": [{"name": "y", "value": "s#1"}]
  })");
}

void expectJsonError(const std::function<void(json &)> &mutate,
                     const std::vector<std::string> &fragments) {
  json j = smallJson();
  mutate(j);
  auto g = graphFromJson(j, "small.json");
  ASSERT_FALSE(g.isOk()) << "accepted " << j.dump();
  EXPECT_EQ(g.message().rfind("small.json: ", 0), 0u) << g.message();
  for (const std::string &f : fragments)
    EXPECT_NE(g.message().find(f), std::string::npos)
        << "message lacks '" << f << "': " << g.message();
}

TEST(GraphJsonErrors, TheSmallGraphIsValid) {
  auto g = graphFromJson(smallJson(), "small.json");
  ASSERT_TRUE(g.isOk()) << g.message();
  EXPECT_EQ(g->numNodes(), 2u);
}

TEST(GraphJsonErrors, MissingFields) {
  expectJsonError([](json &j) { j["nodes"][1].erase("op"); }, {"$.nodes[1]: missing field 'op'"});
  expectJsonError([](json &j) { j.erase("inputs"); }, {"$: missing field 'inputs'"});
  expectJsonError([](json &j) { j["inputs"][0].erase("shape"); },
                  {"$.inputs[0]: missing field 'shape'"});
  expectJsonError([](json &j) { j["nodes"][0]["outputs"][0].erase("dtype"); },
                  {"$.nodes[0].outputs[0]: missing field 'dtype'"});
  expectJsonError([](json &j) { j["outputs"][0].erase("value"); },
                  {"$.outputs[0]: missing field 'value'"});
  expectJsonError(
      [](json &j) {
        j["nodes"][0]["provenance"] = json{{"pass", "p"}};
      },
      {"$.nodes[0].provenance: missing field 'origins'"});
}

TEST(GraphJsonErrors, WrongTypes) {
  expectJsonError([](json &j) { j["nodes"][0] = 3; }, {"$.nodes[0]: expected an object"});
  expectJsonError([](json &j) { j["nodes"] = json::object(); }, {"$.nodes: expected an array"});
  expectJsonError([](json &j) { j["name"] = 7; }, {"$.name: expected a string"});
  expectJsonError([](json &j) { j["nodes"][0]["inputs"][0] = 0; },
                  {"$.nodes[0].inputs[0]: expected a value name"});
  expectJsonError([](json &j) { j["nodes"][0]["attrs"] = json::array(); },
                  {"$.nodes[0].attrs: expected an object"});
  expectJsonError([](json &j) { j["inputs"][0]["shape"] = {2.5}; },
                  {"$.inputs[0].shape[0]: expected an integer"});
  expectJsonError([](json &j) { j["inputs"][0]["role"] = "weights"; },
                  {"$.inputs[0].role: unknown role 'weights'"});
}

TEST(GraphJsonErrors, UnknownValueReference) {
  expectJsonError([](json &j) { j["nodes"][1]["inputs"][0] = "nope"; },
                  {"$.nodes[1].inputs[0]: unknown value 'nope'"});
  // Used before its definition.
  expectJsonError([](json &j) { j["nodes"][0]["inputs"][0] = "s#0"; },
                  {"$.nodes[0].inputs[0]: unknown value 's#0'"});
  // A two-output node has no value under its plain name.
  expectJsonError([](json &j) { j["outputs"][0]["value"] = "s"; },
                  {"$.outputs[0].value: unknown value 's'"});
}

TEST(GraphJsonErrors, DuplicateNames) {
  expectJsonError([](json &j) { j["nodes"][0]["name"] = "x"; },
                  {"$.nodes[0].name: duplicate value name 'x'"});
  expectJsonError(
      [](json &j) {
        j["nodes"][1]["name"] = "r"; // its values become r#0 and r#1, so only the node name clashes
        j["outputs"][0]["value"] = "r#1";
      },
      {"duplicate name 'r'"});
}

TEST(GraphJsonErrors, BadDType) {
  expectJsonError([](json &j) { j["inputs"][0]["dtype"] = "f64"; },
                  {"$.inputs[0].dtype: unknown dtype 'f64'"});
  expectJsonError([](json &j) { j["nodes"][1]["outputs"][1]["dtype"] = "complex"; },
                  {"$.nodes[1].outputs[1].dtype: unknown dtype 'complex'"});
}

TEST(GraphJsonErrors, NegativeOrHugeDimension) {
  expectJsonError(
      [](json &j) {
        j["nodes"][0]["outputs"][0]["shape"] = {2, -1};
      },
      {"$.nodes[0].outputs[0].shape[1]: negative dimension"});
  // 2^64 - 1 must not wrap around to -1.
  expectJsonError([](json &j) { j["inputs"][0]["shape"] = {std::numeric_limits<uint64_t>::max()}; },
                  {"$.inputs[0].shape[0]", "does not fit"});
  expectJsonError(
      [](json &j) {
        j["inputs"][0]["shape"] = {int64_t{1} << 40, int64_t{1} << 40};
      },
      {"$.inputs[0].shape", "too large"});
}

TEST(GraphJsonErrors, FormatAndVersion) {
  expectJsonError([](json &j) { j["format"] = "onnx"; },
                  {"$.format: expected \"kiln.graph\", got \"onnx\""});
  expectJsonError([](json &j) { j["version"] = 2; }, {"$.version: unsupported version"});
  expectJsonError([](json &j) { j["version"] = "1"; }, {"$.version: unsupported version"});
  expectJsonError([](json &j) { j.erase("version"); }, {"$: missing field 'version'"});
}

TEST(GraphJsonErrors, Attributes) {
  expectJsonError(
      [](json &j) {
        j["nodes"][0]["attrs"]["alpha"] = {{"complex", 1}};
      },
      {"$.nodes[0].attrs.alpha: unknown attribute kind 'complex'"});
  expectJsonError(
      [](json &j) {
        j["nodes"][0]["attrs"]["alpha"] = {{"float", "abc"}};
      },
      {"$.nodes[0].attrs.alpha.float: expected a number"});
  expectJsonError(
      [](json &j) {
        j["nodes"][0]["attrs"]["alpha"] = {{"int", 1}, {"float", 2.0}};
      },
      {"$.nodes[0].attrs.alpha: expected an object with one kind key"});
  expectJsonError([](json &j) { j["nodes"][0]["attrs"]["alpha"] = 0.5; },
                  {"$.nodes[0].attrs.alpha: expected an object"});
  expectJsonError(
      [](json &j) {
        j["nodes"][0]["attrs"]["k"] = {{"int", 1.5}};
      },
      {"$.nodes[0].attrs.k.int: expected an integer"});
  expectJsonError(
      [](json &j) {
        j["nodes"][0]["attrs"]["k"] = {{"ints", {1, std::numeric_limits<uint64_t>::max()}}};
      },
      {"$.nodes[0].attrs.k.ints[1]", "does not fit"});
  expectJsonError(
      [](json &j) {
        j["nodes"][0]["attrs"]["k"] = {{"bool", 1}};
      },
      {"$.nodes[0].attrs.k.bool: expected true or false"});
  expectJsonError(
      [](json &j) {
        j["nodes"][0]["attrs"]["k"] = {{"dtype", "f8"}};
      },
      {"$.nodes[0].attrs.k.dtype: expected a dtype name"});
  expectJsonError(
      [](json &j) {
        j["nodes"][0]["attrs"]["k"] = {{"floats", {1.0, "x"}}};
      },
      {"$.nodes[0].attrs.k.floats[1]: expected a number"});
}

TEST(GraphJsonErrors, InvalidJsonTextNamesLineAndColumn) {
  auto g = parseGraphJson("{\n  \"format\": ,\n}", "bad.json");
  ASSERT_FALSE(g.isOk());
  EXPECT_NE(g.message().find("bad.json: invalid JSON"), std::string::npos) << g.message();
  // The stray ',' is the 13th character of line 2.
  EXPECT_NE(g.message().find("line 2, column 13"), std::string::npos) << g.message();
}

TEST(GraphJsonErrors, TopLevelNotAnObject) {
  auto g = parseGraphJson("[1, 2]", "arr.json");
  ASSERT_FALSE(g.isOk());
  EXPECT_NE(g.message().find("arr.json: $: expected an object"), std::string::npos) << g.message();
}

} // namespace
} // namespace kiln
