// Rule files are parsed into a pass; every mistake in one is an error naming
// the file and the JSON path, one test per kind of mistake.
#include <memory>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "passes/fusion/rules/fusion_rule.h"

namespace kiln::passes::rules {
namespace {

using nlohmann::json;

json swiglu() {
  return json::parse(R"({
    "format": "kiln.fusion-rule", "version": 1, "name": "SwiGluFusionRule",
    "group": "UBFusion", "priority": 4200, "default": "on",
    "description": "Fuses w1x * silu(w2x). More text.", "kernel": "swiglu",
    "intermediates": "f32",
    "pattern": {
      "root": "mul",
      "nodes": [
        {"id": "act", "op": "Silu", "inputs": ["$gate"]},
        {"id": "mul", "op": "Mul", "inputs": ["$up", "act"], "commutative": true}
      ]
    }
  })");
}

class ToyPass : public Pass {
public:
  const PassInfo &info() const override { return info_; }
  Expected<PassResult> run(Graph &, const PassContext &) const override { return PassResult{}; }
  PassInfo info_{"TbeMatmulFixPipeFusionPass", PassGroup::UBFusion, 4295};
};

const PassRegistry &noPasses() {
  static PassRegistry registry;
  return registry;
}

// The parser's message for `doc` read from "swiglu.json" (empty when it parses).
std::string errorOf(const json &doc, const PassRegistry &builtin = noPasses()) {
  auto rule = parseFusionRule(doc, "swiglu.json", builtin);
  return rule ? std::string() : rule.message();
}

#define EXPECT_ERROR(doc, fragment)                                                                \
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, fragment, errorOf(doc))

TEST(FusionRuleParser, ValidRuleBecomesPassInfo) {
  json doc = swiglu();
  auto rule = parseFusionRule(doc, "swiglu.json", noPasses());
  ASSERT_TRUE(rule) << rule.message();
  EXPECT_EQ(rule->info.name, doc["name"]);
  EXPECT_EQ(rule->info.group, PassGroup::UBFusion);
  EXPECT_EQ(rule->info.priority, doc["priority"]);
  EXPECT_TRUE(rule->info.default_on);
  EXPECT_TRUE(rule->info.may_disable); // the default when absent
  EXPECT_EQ(rule->info.summary, "Fuses w1x * silu(w2x)");
  EXPECT_EQ(rule->info.description, doc["description"]);
  EXPECT_EQ(rule->kernel, "swiglu");
  EXPECT_EQ(rule->intermediates, Intermediates::F32);
  EXPECT_EQ(rule->source, "swiglu.json");
  const Pattern &p = rule->pattern;
  ASSERT_EQ(p.nodes.size(), 2u);
  EXPECT_EQ(p.nodes[p.root].id, "mul");
  ASSERT_EQ(p.wildcards.size(), 2u); // in order of first use
  EXPECT_EQ(p.wildcards[0].name, "$gate");
  EXPECT_EQ(p.wildcards[1].name, "$up");
  EXPECT_EQ(p.nodes[1].inputs[1], (PatternRef{PatternRef::Kind::Node, 0}));
  EXPECT_TRUE(p.nodes[1].commutative);
  EXPECT_FALSE(p.nodes[0].commutative);
}

TEST(FusionRuleParser, UnknownFieldsAreErrors) {
  json top = swiglu();
  top["priorty"] = 1;
  EXPECT_ERROR(top, "swiglu.json: $.priorty: unknown field");
  json node = swiglu();
  node["pattern"]["nodes"][1]["comutative"] = true;
  EXPECT_ERROR(node, "swiglu.json: $.pattern.nodes[1].comutative: unknown field");
  json constraint = swiglu();
  constraint["pattern"]["nodes"][0]["constraints"] = {{"dtypes", {"f16"}}};
  EXPECT_ERROR(constraint, "swiglu.json: $.pattern.nodes[0].constraints.dtypes: unknown field");
  json wildcard = swiglu();
  wildcard["pattern"]["wildcards"] = {{"$up", {{"attrs", json::object()}}}};
  EXPECT_ERROR(wildcard, "swiglu.json: $.pattern.wildcards.$up.attrs: unknown field");
}

TEST(FusionRuleParser, FormatAndVersionAreChecked) {
  json format = swiglu();
  format["format"] = "kiln.target";
  EXPECT_ERROR(format, "swiglu.json: $.format: expected \"kiln.fusion-rule\"");
  json version = swiglu();
  version["version"] = 2;
  EXPECT_ERROR(version, "swiglu.json: $.version: unsupported version 2");
  json missing = swiglu();
  missing.erase("kernel");
  EXPECT_ERROR(missing, "swiglu.json: $: missing field 'kernel'");
}

TEST(FusionRuleParser, UnknownOpSuggestsTheNearest) {
  json doc = swiglu();
  doc["pattern"]["nodes"][0]["op"] = "Slu";
  EXPECT_ERROR(doc, "swiglu.json: $.pattern.nodes[0].op: unknown op 'Slu' (did you mean Silu?)");
  json list = swiglu();
  list["pattern"]["nodes"][1]["op"] = {"Add", "Mull"};
  EXPECT_ERROR(list,
               "swiglu.json: $.pattern.nodes[1].op[1]: unknown op 'Mull' (did you mean Mul?)");
}

TEST(FusionRuleParser, DuplicateIds) {
  json doc = swiglu();
  doc["pattern"]["nodes"][1]["id"] = "act";
  EXPECT_ERROR(doc, "swiglu.json: $.pattern.nodes[1].id: duplicate id 'act' (also at "
                    "$.pattern.nodes[0])");
}

TEST(FusionRuleParser, InputNamingNoNode) {
  json doc = swiglu();
  doc["pattern"]["nodes"][1]["inputs"] = {"$up", "silu"};
  EXPECT_ERROR(doc, "swiglu.json: $.pattern.nodes[1].inputs[1]: input 'silu' names no node");
  json bare = swiglu();
  bare["pattern"]["nodes"][0]["inputs"] = {"$"};
  EXPECT_ERROR(bare, "swiglu.json: $.pattern.nodes[0].inputs[0]: a wildcard needs a name");
}

TEST(FusionRuleParser, Cycle) {
  json doc = swiglu();
  doc["pattern"]["nodes"][0]["inputs"] = {"mul"};
  EXPECT_ERROR(doc, "swiglu.json: $.pattern.nodes[0]: the pattern has a cycle: act -> mul -> act");
}

TEST(FusionRuleParser, RootThatDoesNotExist) {
  json doc = swiglu();
  doc["pattern"]["root"] = "product";
  EXPECT_ERROR(doc, "swiglu.json: $.pattern.root: root 'product' is not the id of a node (ids: "
                    "act, mul)");
}

TEST(FusionRuleParser, NodeNotReachableFromRoot) {
  json doc = swiglu();
  doc["pattern"]["nodes"].push_back({{"id", "extra"}, {"op", "Neg"}, {"inputs", {"$up"}}});
  EXPECT_ERROR(doc, "swiglu.json: $.pattern.nodes[2]: node 'extra' is not reachable from the root "
                    "'mul'");
}

TEST(FusionRuleParser, NameOfABuiltinPass) {
  PassRegistry builtin;
  ASSERT_TRUE(builtin.add(std::make_shared<ToyPass>()).isOk());
  json doc = swiglu();
  doc["name"] = "TbeMatmulFixPipeFusionPass";
  EXPECT_PRED_FORMAT2(::testing::IsSubstring,
                      "swiglu.json: $.name: 'TbeMatmulFixPipeFusionPass' is the name of a "
                      "built-in pass",
                      errorOf(doc, builtin));
  json bad = swiglu();
  bad["name"] = "Swi Glu";
  EXPECT_ERROR(bad, "swiglu.json: $.name: 'Swi Glu' is not a pass name");
}

TEST(FusionRuleParser, EnumeratedFields) {
  json group = swiglu();
  group["group"] = "Precision";
  EXPECT_ERROR(group, "swiglu.json: $.group: expected \"UBFusion\" or \"GraphFusion\"");
  json def = swiglu();
  def["default"] = "yes";
  EXPECT_ERROR(def, "swiglu.json: $.default: expected \"on\" or \"off\"");
  json inter = swiglu();
  inter["intermediates"] = "f16";
  EXPECT_ERROR(inter, "swiglu.json: $.intermediates: expected \"f32\" or \"storage\"");
  json priority = swiglu();
  priority["priority"] = "high";
  EXPECT_ERROR(priority, "swiglu.json: $.priority: expected an integer");
}

TEST(FusionRuleParser, MayDisableFalseNeedsAReason) {
  json doc = swiglu();
  doc["may_disable"] = false;
  EXPECT_ERROR(doc, "swiglu.json: $: missing field 'required_because'");
  doc["required_because"] = "the kernel library has no unfused SiLU";
  auto rule = parseFusionRule(doc, "swiglu.json", noPasses());
  ASSERT_TRUE(rule) << rule.message();
  EXPECT_FALSE(rule->info.may_disable);
  EXPECT_EQ(rule->info.required_because, doc["required_because"]);
  json stray = swiglu();
  stray["required_because"] = "x";
  EXPECT_ERROR(stray, "swiglu.json: $.required_because: only a rule with \"may_disable\": false");
}

TEST(FusionRuleParser, InputCountMustSuitTheOp) {
  json doc = swiglu();
  doc["pattern"]["nodes"][0]["inputs"] = {"$gate", "$up"};
  EXPECT_ERROR(doc, "swiglu.json: $.pattern.nodes[0].inputs: Silu takes 1 input, the pattern "
                    "gives it 2");
}

TEST(FusionRuleParser, CommutativeNeedsTwoInputs) {
  json doc = swiglu();
  doc["pattern"]["nodes"][0]["commutative"] = true;
  EXPECT_ERROR(doc, "swiglu.json: $.pattern.nodes[0].commutative: only a node with two inputs");
}

TEST(FusionRuleParser, EscapesIsForInnerNodes) {
  json doc = swiglu();
  doc["pattern"]["nodes"][1]["escapes"] = true;
  EXPECT_ERROR(doc, "swiglu.json: $.pattern.nodes[1].escapes: the root's value always leaves");
}

TEST(FusionRuleParser, AttributeConstraintsAreTypedByTheOp) {
  json unknown = swiglu();
  unknown["pattern"]["nodes"][0]["constraints"] = {{"attrs", {{"axis", 1}}}};
  EXPECT_ERROR(unknown, "swiglu.json: $.pattern.nodes[0].constraints.attrs.axis: Silu has no "
                        "attribute 'axis'");
  json kind = swiglu();
  kind["pattern"]["nodes"][0] = {{"id", "act"},
                                 {"op", "Cast"},
                                 {"inputs", {"$gate"}},
                                 {"constraints", {{"attrs", {{"dtype", 3}}}}}};
  EXPECT_ERROR(kind, "swiglu.json: $.pattern.nodes[0].constraints.attrs.dtype: expected a dtype");
  json any = swiglu();
  any["pattern"]["nodes"][0]["op"] = "*";
  any["pattern"]["nodes"][0]["constraints"] = {{"attrs", {{"dtype", "f32"}}}};
  EXPECT_ERROR(any, "swiglu.json: $.pattern.nodes[0].constraints.attrs: attributes need named ops");
}

TEST(FusionRuleParser, ValueConstraints) {
  json dtype = swiglu();
  dtype["pattern"]["nodes"][1]["constraints"] = {{"dtype", {"f16", "fp8"}}};
  EXPECT_ERROR(dtype, "swiglu.json: $.pattern.nodes[1].constraints.dtype[1]: unknown dtype 'fp8'");
  json rank = swiglu();
  rank["pattern"]["nodes"][1]["constraints"] = {{"rank", 2}, {"shape", {-1, 4, 4}}};
  EXPECT_ERROR(rank,
               "swiglu.json: $.pattern.nodes[1].constraints.shape: has 3 extents but rank is 2");
  json extent = swiglu();
  extent["pattern"]["nodes"][1]["constraints"] = {{"shape", {-2}}};
  EXPECT_ERROR(extent, "swiglu.json: $.pattern.nodes[1].constraints.shape[0]: an extent is -1");
  json same = swiglu();
  same["pattern"]["wildcards"] = {{"$up", {{"same_shape_as", "$down"}}}};
  EXPECT_ERROR(same, "swiglu.json: $.pattern.wildcards.$up.same_shape_as: '$down' is neither a "
                     "node id nor a wildcard");
}

TEST(FusionRuleParser, WildcardConstraintsNeedAUsedWildcard) {
  json doc = swiglu();
  doc["pattern"]["wildcards"] = {{"$x", {{"rank", 3}}}};
  EXPECT_ERROR(doc, "swiglu.json: $.pattern.wildcards.$x: '$x' is not a wildcard used as a node "
                    "input");
}

TEST(FusionRuleParser, SyntaxErrorNamesLineAndColumn) {
  auto rule = parseFusionRuleText("{\n  \"format\": \"kiln.fusion-rule\",\n  oops\n}", "bad.json",
                                  noPasses());
  ASSERT_FALSE(rule);
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "bad.json: invalid JSON", rule.message());
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "line 3", rule.message());
}

} // namespace
} // namespace kiln::passes::rules
