// Printer: golden text of a small hand-built graph, covering multi-output
// nodes, every attribute kind, string escaping and provenance.
#include <cmath>
#include <limits>
#include <sstream>

#include <gtest/gtest.h>

#include "ir/printer.h"

namespace kiln {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Graph buildTiny() {
  Graph g("tiny");
  ValueId x = g.addInput("x", {DType::F16, {2, 3}}, InputRole::Data);
  ValueId w = g.addInput("w", {DType::F32, {3, 4}}, InputRole::Parameter);
  g.addInput("m", {DType::F32, {3, 4}}, InputRole::OptimizerState);
  g.addInput("lr", {DType::F32, {}}, InputRole::Hyperparameter);
  NodeId split = g.addNode("Split", "split", {x}, {{DType::F16, {2, 1}}, {DType::F16, {2, 2}}},
                           {{"axis", int64_t{1}}, {"sizes", std::vector<int64_t>{1, 2}}});
  ValueId s0 = g.node(split).outputs[0];
  ValueId s1 = g.node(split).outputs[1];
  NodeId mm = g.addNode("MatMul", "h.0.mm", {s1, w}, {{DType::F32, {2, 4}}},
                        {{"alpha", 0.5},
                         {"whole", 3.0},
                         {"zero", -0.0},
                         {"neg", int64_t{-3}},
                         {"transpose_b", true},
                         {"kind", std::string("fast")},
                         {"acc", DType::F32},
                         {"scales", std::vector<double>{0.25, kInf, -kInf, std::nan("")}}},
                        Provenance{"fusion", {"mm.a", "mm.b"}});
  ValueId y = g.node(mm).outputs[0];
  g.addNode("Print", "dbg", {y}, {});
  NodeId cast = g.addNode("Cast", "cast", {s0}, {{DType::BF16, {2, 1}}},
                          {{"to", DType::BF16}, {"note", std::string("say \"hi\"\n\tC:\\")}},
                          Provenance{"frontend", {}});
  g.addOutput("y", y);
  g.addOutput("z", g.node(cast).outputs[0]);
  g.addOutput("s0", s0);
  return g;
}

// Written from the format in printer.h: inputs, nodes in order, outputs;
// attributes sorted by key; floats always with a '.', an exponent or inf/nan.
const char *kTinyText = R"(graph tiny {
  input %x: f16[2,3] data
  input %w: f32[3,4] param
  input %m: f32[3,4] state
  input %lr: f32[] hyper
  %split#0: f16[2,1], %split#1: f16[2,2] = Split(%x) {axis=1, sizes=[1,2]}
  %h.0.mm: f32[2,4] = MatMul(%split#1, %w) {acc=f32, alpha=0.5, kind="fast", neg=-3, scales=[0.25,inf,-inf,nan], transpose_b=true, whole=3.0, zero=-0.0}
  Print(%h.0.mm)
  %cast: bf16[2,1] = Cast(%split#0) {note="say \"hi\"\n\tC:\\", to=bf16}
  output y = %h.0.mm: f32[2,4]
  output z = %cast: bf16[2,1]
  output s0 = %split#0: f16[2,1]
}
)";

TEST(Printer, GoldenText) { EXPECT_EQ(graphToText(buildTiny()), kTinyText); }

TEST(Printer, PrintGraphWritesTheSameText) {
  std::ostringstream os;
  printGraph(buildTiny(), os);
  EXPECT_EQ(os.str(), kTinyText);
}

TEST(Printer, ProvenanceIsAppendedOnlyWhenAsked) {
  Graph g = buildTiny();
  const Node &mm = g.node(g.findNode("h.0.mm"));
  const std::string plain = nodeToText(g, mm);
  EXPECT_EQ(plain.find("//"), std::string::npos);
  EXPECT_EQ(nodeToText(g, mm, PrintOptions{true}), plain + "  // fusion <- mm.a, mm.b");
  // A pass without origins prints just the pass.
  const Node &cast = g.node(g.findNode("cast"));
  EXPECT_EQ(nodeToText(g, cast, PrintOptions{true}), nodeToText(g, cast) + "  // frontend");
  // Nodes without provenance are unchanged.
  const Node &dbg = g.node(g.findNode("dbg"));
  EXPECT_EQ(nodeToText(g, dbg, PrintOptions{true}), "Print(%h.0.mm)");
}

TEST(Printer, OneLinePerEntry) {
  Graph g = buildTiny();
  const std::string text = graphToText(g, PrintOptions{true});
  size_t lines = 0;
  for (char c : text)
    lines += c == '\n';
  // Header, inputs, nodes, outputs, closing brace: a newline in an attribute would break this.
  EXPECT_EQ(lines, 2 + g.inputs().size() + g.numNodes() + g.outputs().size());
}

// Names come from files: a newline or a terminal escape in one is printed
// escaped, so the entry stays on its line and the terminal shows it.
TEST(Printer, NamesWithControlCharactersAreEscaped) {
  Graph g(std::string("g\x1b[2J"));
  ValueId x = g.addInput("x\ny", {DType::F32, {2}}, InputRole::Data);
  NodeId relu = g.addNode("Relu", "r\r\x1b]0;t\x07", {x}, {{DType::F32, {2}}}, {});
  g.addOutput("out\n", g.node(relu).outputs[0]);
  EXPECT_EQ(graphToText(g), "graph g\\x1b[2J {\n"
                            "  input %x\\x0ay: f32[2] data\n"
                            "  %r\\x0d\\x1b]0;t\\x07: f32[2] = Relu(%x\\x0ay)\n"
                            "  output out\\x0a = %r\\x0d\\x1b]0;t\\x07: f32[2]\n"
                            "}\n");
}

TEST(Printer, ValueNames) {
  Graph g = buildTiny();
  const Node &split = g.node(g.findNode("split"));
  EXPECT_EQ(g.valueName(split.outputs[0]), "split#0");
  EXPECT_EQ(g.valueName(split.outputs[1]), "split#1");
  EXPECT_EQ(g.valueName(g.inputs()[1].value), "w");
  EXPECT_EQ(g.valueName(g.node(g.findNode("h.0.mm")).outputs[0]), "h.0.mm");
  EXPECT_NE(g.valueName(1000).find("invalid"), std::string::npos);
}

TEST(Printer, AttrValueText) {
  EXPECT_EQ(attrValueToString(AttrValue(false)), "false");
  EXPECT_EQ(attrValueToString(AttrValue(int64_t{-7})), "-7");
  EXPECT_EQ(attrValueToString(AttrValue(0.1)), "0.1"); // shortest round-tripping form
  EXPECT_EQ(attrValueToString(AttrValue(2.0)), "2.0");
  EXPECT_EQ(attrValueToString(AttrValue(std::vector<int64_t>{})), "[]");
  EXPECT_EQ(attrValueToString(AttrValue(std::vector<double>{1.0, 0.5})), "[1.0,0.5]");
  EXPECT_EQ(attrValueToString(AttrValue(DType::I64)), "i64");
  EXPECT_EQ(attrValueToString(AttrValue(std::string("a\x01"))), "\"a\\x01\"");
}

// A string literal must become a string attribute, not a bool.
TEST(Printer, StringLiteralAttributeIsAString) {
  AttrMap attrs{{"mode", "fast"}};
  EXPECT_EQ(attrKindOf(*attrs.find("mode")), AttrKind::String);
  EXPECT_EQ(attrs.getString("mode"), "fast");
}

} // namespace
} // namespace kiln
