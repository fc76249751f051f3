// The matcher on small hand-built graphs: commutative operands, shared
// wildcards, uses outside the match, constraints, groups and convexity.
#include <memory>

#include <gtest/gtest.h>

#include "ops/op_builder.h"
#include "passes/fusion/rules/pattern_matcher.h"
#include "passes/fusion/rules/rule_pass.h"

namespace kiln::passes::rules {
namespace {

FusionRule ruleFrom(const std::string &pattern, const std::string &name = "TestRule") {
  static PassRegistry none;
  std::string text = R"({"format": "kiln.fusion-rule", "version": 1, "name": ")" + name +
                     R"(", "group": "UBFusion", "priority": 4200, "default": "on",
      "description": "test", "kernel": "k", "intermediates": "f32", "pattern": )" +
                     pattern + "}";
  auto rule = parseFusionRuleText(text, "test.json", none);
  EXPECT_TRUE(rule) << rule.message();
  return rule ? *rule : FusionRule{};
}

const char *kSwiGlu = R"({"root": "mul", "nodes": [
    {"id": "act", "op": "Silu", "inputs": ["$gate"]},
    {"id": "mul", "op": "Mul", "inputs": ["$up", "act"], "commutative": true}]})";

struct Inputs {
  Graph graph{"t"};
  ops::OpBuilder b{graph};
  ValueId x, y;
  explicit Inputs(DType dtype = DType::F32, Shape shape = {2, 4}) {
    x = graph.addInput("x", TensorType{dtype, shape}, InputRole::Data);
    y = graph.addInput("y", TensorType{dtype, shape}, InputRole::Data);
  }
  NodeId node(const char *name) const { return graph.findNode(name); }
};

std::vector<std::string> memberNames(const Graph &g, GroupId id) {
  std::vector<std::string> out;
  const std::vector<std::vector<NodeId>> members = g.groupMembers();
  for (NodeId n : members[id])
    out.push_back(g.node(n).name);
  return out;
}

TEST(PatternMatcher, CommutativeNodeMatchesEitherOrder) {
  Inputs t;
  ValueId s = t.b.create("Silu", "s", {t.y});
  t.graph.addOutput("m", t.b.create("Mul", "m", {s, t.x})); // Silu first: the swapped order
  FusionRule rule = ruleFrom(kSwiGlu);
  std::vector<Match> found = *matchStructure(t.graph, rule.pattern, t.node("m"));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].wildcards[0], t.y); // $gate
  EXPECT_EQ(found[0].wildcards[1], t.x); // $up
  EXPECT_EQ(found[0].members(), (std::vector<NodeId>{t.node("s"), t.node("m")}));

  FusionRule ordered = ruleFrom(R"({"root": "mul", "nodes": [
      {"id": "act", "op": "Silu", "inputs": ["$gate"]},
      {"id": "mul", "op": "Mul", "inputs": ["$up", "act"]}]})");
  EXPECT_TRUE(matchStructure(t.graph, ordered.pattern, t.node("m"))->empty());
}

const char *kRotary = R"({"root": "add", "nodes": [
    {"id": "mc", "op": "Mul", "inputs": ["$x", "$cos"]},
    {"id": "r", "op": "RotateHalf", "inputs": ["$x"]},
    {"id": "ms", "op": "Mul", "inputs": ["r", "$sin"]},
    {"id": "add", "op": "Add", "inputs": ["mc", "ms"]}]})";

TEST(PatternMatcher, SharedWildcardBindsOneValue) {
  FusionRule rule = ruleFrom(kRotary);
  {
    Inputs t;
    ValueId c = t.graph.addInput("c", TensorType{DType::F32, {2, 4}}, InputRole::Data);
    ValueId mc = t.b.create("Mul", "mc", {t.x, c});
    ValueId ms = t.b.create("Mul", "ms", {t.b.create("RotateHalf", "r", {t.x}), t.y});
    t.graph.addOutput("out", t.b.create("Add", "add", {mc, ms}));
    std::vector<Match> found = *matchStructure(t.graph, rule.pattern, t.node("add"));
    ASSERT_EQ(found.size(), 1u);
    EXPECT_EQ(found[0].wildcards[0], t.x);
  }
  {
    // RotateHalf reads y, the cos product x: $x cannot be both.
    Inputs t;
    ValueId mc = t.b.create("Mul", "mc", {t.x, t.x});
    ValueId ms = t.b.create("Mul", "ms", {t.b.create("RotateHalf", "r", {t.y}), t.y});
    t.graph.addOutput("out", t.b.create("Add", "add", {mc, ms}));
    EXPECT_TRUE(matchStructure(t.graph, rule.pattern, t.node("add"))->empty());
  }
}

TEST(PatternMatcher, BacktracksThroughTheRestOfThePattern) {
  // Add(sin product, cos product): the first order binds $x to RotateHalf's
  // result and fails one level down; the swapped order matches.
  FusionRule rule = ruleFrom(R"({"root": "add", "nodes": [
      {"id": "mc", "op": "Mul", "inputs": ["$x", "$cos"]},
      {"id": "r", "op": "RotateHalf", "inputs": ["$x"]},
      {"id": "ms", "op": "Mul", "inputs": ["r", "$sin"]},
      {"id": "add", "op": "Add", "inputs": ["mc", "ms"], "commutative": true}]})");
  Inputs t;
  ValueId c = t.graph.addInput("c", TensorType{DType::F32, {2, 4}}, InputRole::Data);
  ValueId ms = t.b.create("Mul", "ms", {t.b.create("RotateHalf", "r", {t.x}), t.y});
  ValueId mc = t.b.create("Mul", "mc", {t.x, c});
  t.graph.addOutput("out", t.b.create("Add", "add", {ms, mc}));
  std::vector<Match> found = *matchStructure(t.graph, rule.pattern, t.node("add"));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].wildcards[0], t.x);
  EXPECT_EQ(found[0].nodes[0], t.node("mc"));
  EXPECT_TRUE(matchStructure(t.graph, ruleFrom(kRotary).pattern, t.node("add"))->empty());
}

TEST(PatternMatcher, OneWildcardInTwoPlacesNeedsOneValue) {
  Inputs t;
  ValueId sx = t.b.create("Silu", "sx", {t.x});
  ValueId sy = t.b.create("Silu", "sy", {t.y});
  t.graph.addOutput("m", t.b.create("Mul", "m", {sx, sy}));
  FusionRule shared = ruleFrom(R"({"root": "mul", "nodes": [
      {"id": "a", "op": "Silu", "inputs": ["$v"]},
      {"id": "b", "op": "Silu", "inputs": ["$v"]},
      {"id": "mul", "op": "Mul", "inputs": ["a", "b"], "commutative": true}]})");
  EXPECT_TRUE(matchStructure(t.graph, shared.pattern, t.node("m"))->empty());
  FusionRule distinct = ruleFrom(R"({"root": "mul", "nodes": [
      {"id": "a", "op": "Silu", "inputs": ["$v"]},
      {"id": "b", "op": "Silu", "inputs": ["$w"]},
      {"id": "mul", "op": "Mul", "inputs": ["a", "b"], "commutative": true}]})");
  EXPECT_EQ(matchStructure(t.graph, distinct.pattern, t.node("m"))->size(), 2u); // both orders
}

TEST(PatternMatcher, WildcardMustComeFromOutside) {
  // Mul(s, s): $up would be the matched Silu's own value.
  Inputs t;
  ValueId s = t.b.create("Silu", "s", {t.y});
  t.graph.addOutput("m", t.b.create("Mul", "m", {s, s}));
  EXPECT_TRUE(matchStructure(t.graph, ruleFrom(kSwiGlu).pattern, t.node("m"))->empty());
}

TEST(PatternMatcher, UseOutsideThePatternIsRejected) {
  Inputs t;
  ValueId s = t.b.create("Silu", "s", {t.y});
  t.graph.addOutput("m", t.b.create("Mul", "m", {t.x, s}));
  t.graph.addOutput("n", t.b.create("Neg", "n", {s}));
  PassResult result = *applyFusionRule(t.graph, ruleFrom(kSwiGlu));
  EXPECT_EQ(result.match_times, 1);
  EXPECT_EQ(result.effect_times, 0);
  ASSERT_EQ(result.rejections.size(), 1u);
  EXPECT_EQ(result.rejections[0].node, "m");
  EXPECT_EQ(result.rejections[0].reason, "'s' is also used by 'n' outside the pattern");
  EXPECT_TRUE(t.graph.groups().empty());

  Inputs out;
  ValueId s2 = out.b.create("Silu", "s", {out.y});
  out.graph.addOutput("m", out.b.create("Mul", "m", {out.x, s2}));
  out.graph.addOutput("act", s2);
  PassResult r2 = *applyFusionRule(out.graph, ruleFrom(kSwiGlu));
  ASSERT_EQ(r2.rejections.size(), 1u);
  EXPECT_EQ(r2.rejections[0].reason, "'s' is also used by graph output 'act' outside the pattern");
}

TEST(PatternMatcher, EscapingNodeMayBeUsedOutside) {
  Inputs t;
  ValueId s = t.b.create("Silu", "s", {t.y});
  t.graph.addOutput("m", t.b.create("Mul", "m", {t.x, s}));
  t.graph.addOutput("n", t.b.create("Neg", "n", {s}));
  FusionRule rule = ruleFrom(R"({"root": "mul", "nodes": [
      {"id": "act", "op": "Silu", "inputs": ["$gate"], "escapes": true},
      {"id": "mul", "op": "Mul", "inputs": ["$up", "act"], "commutative": true}]})",
                             "EscapeRule");
  PassResult result = *applyFusionRule(t.graph, rule);
  EXPECT_EQ(result.effect_times, 1);
  ASSERT_EQ(t.graph.groups().size(), 1u);
  const FusionGroup &g = t.graph.group(0);
  EXPECT_EQ(g.name, "fused.m");
  EXPECT_EQ(g.kernel, "k");
  EXPECT_EQ(g.formed_by, "EscapeRule");
  EXPECT_EQ(g.intermediates, Intermediates::F32);
  EXPECT_EQ(memberNames(t.graph, 0), (std::vector<std::string>{"s", "m"}));
  EXPECT_EQ(t.graph.node(t.node("n")).group, kNoGroup);
}

TEST(PatternMatcher, NonConvexMatchIsRejected) {
  // act -> n -> add and act -> add: n sits between two members.
  Inputs t;
  ValueId s = t.b.create("Silu", "s", {t.x});
  ValueId n = t.b.create("Neg", "n", {s});
  t.graph.addOutput("out", t.b.create("Add", "add", {s, n}));
  FusionRule rule = ruleFrom(R"({"root": "add", "nodes": [
      {"id": "act", "op": "Silu", "inputs": ["$x"], "escapes": true},
      {"id": "add", "op": "Add", "inputs": ["act", "$other"]}]})");
  PassResult result = *applyFusionRule(t.graph, rule);
  EXPECT_EQ(result.match_times, 1);
  EXPECT_EQ(result.effect_times, 0);
  ASSERT_EQ(result.rejections.size(), 1u);
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "leaves the group through 'n'",
                      result.rejections[0].reason);
}

TEST(PatternMatcher, NodesInAGroupAreLeftAlone) {
  Inputs t;
  ValueId s = t.b.create("Silu", "s", {t.y});
  t.graph.addOutput("m", t.b.create("Mul", "m", {t.x, s}));
  FusionRule rule = ruleFrom(kSwiGlu);
  EXPECT_EQ(applyFusionRule(t.graph, rule)->effect_times, 1);
  PassResult again = *applyFusionRule(t.graph, rule);
  EXPECT_EQ(again.match_times, 1);
  EXPECT_EQ(again.effect_times, 0);
  ASSERT_EQ(again.rejections.size(), 1u);
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "is already in fused group 'fused.m'",
                      again.rejections[0].reason);
}

TEST(PatternMatcher, RootWithTheWrongStructureIsNoMatch) {
  Inputs t;
  t.graph.addOutput("m", t.b.create("Mul", "m", {t.x, t.y}));
  PassResult result = *applyFusionRule(t.graph, ruleFrom(kSwiGlu));
  EXPECT_EQ(result.match_times, 0);
  EXPECT_TRUE(result.rejections.empty());
}

// Runs `pattern` on Mul(x, Silu(y)) in `dtype`, shape [2, 4], and returns the rejection or "".
std::string verdict(const std::string &pattern, DType dtype = DType::F32) {
  Inputs t(dtype);
  ValueId s = t.b.create("Silu", "s", {t.y});
  t.graph.addOutput("m", t.b.create("Mul", "m", {t.x, s}));
  PassResult result = *applyFusionRule(t.graph, ruleFrom(pattern));
  EXPECT_EQ(result.match_times, 1);
  if (result.effect_times == 1)
    return "";
  return result.rejections.empty() ? "no rejection" : result.rejections[0].reason;
}

std::string swigluWith(const std::string &mul_constraints, const std::string &wildcards = "{}") {
  return R"({"root": "mul", "wildcards": )" + wildcards + R"(, "nodes": [
      {"id": "act", "op": "Silu", "inputs": ["$gate"]},
      {"id": "mul", "op": "Mul", "inputs": ["$up", "act"], "commutative": true,
       "constraints": )" +
         mul_constraints + "}]}";
}

TEST(PatternMatcher, DTypeRankAndShapeConstraints) {
  EXPECT_EQ(verdict(swigluWith(R"({"dtype": ["f16", "bf16"]})"), DType::F16), "");
  EXPECT_EQ(verdict(swigluWith(R"({"dtype": ["f16", "bf16"]})")),
            "constraint $.pattern.nodes[1].constraints.dtype failed: 'm' is f32, not f16, bf16");
  EXPECT_EQ(verdict(swigluWith(R"({"rank": 2})")), "");
  EXPECT_EQ(verdict(swigluWith(R"({"rank": 3})")),
            "constraint $.pattern.nodes[1].constraints.rank failed: 'm' has rank 2, not 3");
  EXPECT_EQ(verdict(swigluWith(R"({"shape": [-1, 4]})")), "");
  EXPECT_EQ(verdict(swigluWith(R"({"shape": [-1, 8]})")),
            "constraint $.pattern.nodes[1].constraints.shape failed: 'm' has shape [2,4], not "
            "[-1,8]");
  EXPECT_EQ(verdict(swigluWith("{}", R"({"$up": {"dtype": ["bf16"]}})")),
            "constraint $.pattern.wildcards.$up.dtype failed: 'x' is f32, not bf16");
}

TEST(PatternMatcher, SameShapeConstraint) {
  EXPECT_EQ(verdict(swigluWith(R"({"same_shape_as": "$gate"})")), "");
  // x [2, 4] times Silu(y [4]) broadcasts: the shapes differ.
  Inputs t;
  ValueId y = t.graph.addInput("y4", TensorType{DType::F32, {4}}, InputRole::Data);
  ValueId s = t.b.create("Silu", "s", {y});
  t.graph.addOutput("m", t.b.create("Mul", "m", {t.x, s}));
  PassResult result =
      *applyFusionRule(t.graph, ruleFrom(swigluWith("{}", R"({"$up": {"same_shape_as": "act"}})")));
  ASSERT_EQ(result.rejections.size(), 1u);
  EXPECT_EQ(result.rejections[0].reason,
            "constraint $.pattern.wildcards.$up.same_shape_as failed: 'x' has shape [2,4] but 's' "
            "(act) has [4]");
}

TEST(PatternMatcher, AttributeConstraint) {
  FusionRule rule = ruleFrom(R"({"root": "up", "nodes": [
      {"id": "down", "op": "Cast", "inputs": ["$x"], "constraints": {"attrs": {"dtype": "f16"}}},
      {"id": "up", "op": "Cast", "inputs": ["down"], "constraints": {"attrs": {"dtype": "f32"}}}]})");
  auto build = [](DType middle) {
    auto t = std::make_unique<Inputs>();
    ValueId d = t->b.create("Cast", "down", {t->x}, {{"dtype", middle}});
    t->graph.addOutput("out", t->b.create("Cast", "up", {d}, {{"dtype", DType::F32}}));
    return t;
  };
  auto good = build(DType::F16);
  EXPECT_EQ(applyFusionRule(good->graph, rule)->effect_times, 1);
  auto bad = build(DType::BF16);
  PassResult result = *applyFusionRule(bad->graph, rule);
  ASSERT_EQ(result.rejections.size(), 1u);
  EXPECT_EQ(result.rejections[0].reason,
            "constraint $.pattern.nodes[0].constraints.attrs failed: 'down' has dtype=bf16, not "
            "f16");
}

// A chain of commutative Adds over a graph where every Add reads the two
// before it (a Fibonacci DAG): the operand orders to try grow as 1.6^depth,
// and the leaf (a Mul) never matches. The search stops at its budget with an
// error naming the rule, instead of running for minutes.
TEST(PatternMatcher, AnExplodingSearchStopsAtItsBudget) {
  const int depth = 40;
  std::string nodes;
  for (int k = 0; k < depth; ++k)
    nodes += R"({"id": "a)" + std::to_string(k) + R"(", "op": "Add", "inputs": ["a)" +
             std::to_string(k + 1) + R"(", "$w)" + std::to_string(k) +
             R"("], "commutative": true}, )";
  nodes += R"({"id": "a)" + std::to_string(depth) + R"(", "op": "Mul", "inputs": ["$p", "$q"]})";
  FusionRule rule = ruleFrom(R"({"root": "a0", "nodes": [)" + nodes + "]}", "DeepRule");
  Inputs t;
  std::vector<ValueId> v{t.x, t.y};
  for (int k = 0; k < depth + 2; ++k)
    v.push_back(t.b.create("Add", "v" + std::to_string(k), {v[v.size() - 1], v[v.size() - 2]}));
  t.graph.addOutput("out", v.back());
  const NodeId root = t.graph.value(v.back()).producer;

  auto small = matchStructure(t.graph, rule.pattern, root, 16, 1000);
  ASSERT_FALSE(small.isOk());
  EXPECT_NE(small.message().find("more than 1000 steps"), std::string::npos) << small.message();
  EXPECT_NE(small.message().find("v" + std::to_string(depth + 1)), std::string::npos)
      << small.message();

  auto applied = applyFusionRule(t.graph, rule);
  ASSERT_FALSE(applied.isOk());
  EXPECT_NE(applied.message().find("fusion rule 'DeepRule' (test.json)"), std::string::npos)
      << applied.message();
  EXPECT_NE(applied.message().find("--disable-pass DeepRule"), std::string::npos)
      << applied.message();
}

// Within the budget an ordinary pattern matches as before.
TEST(PatternMatcher, AnOrdinaryPatternFitsTheBudget) {
  Inputs t;
  ValueId s = t.b.create("Silu", "s", {t.y});
  t.graph.addOutput("m", t.b.create("Mul", "m", {t.x, s}));
  auto found = matchStructure(t.graph, ruleFrom(kSwiGlu).pattern, t.node("m"), 16, 10);
  ASSERT_TRUE(found.isOk()) << found.message();
  EXPECT_EQ(found->size(), 1u);
}

} // namespace
} // namespace kiln::passes::rules
