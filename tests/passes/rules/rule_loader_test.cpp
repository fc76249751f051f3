// Loading rules: the built-in ones from fusion_rules/, a job's folder, name
// clashes, and rules switched on and off like any other pass.
#include <filesystem>

#include <gtest/gtest.h>

#include "ops/op_builder.h"
#include "passes/fusion/rules/rule_loader.h"
#include "passes/fusion/rules/rule_pass.h"
#include "support/file_io.h"
#include "tests/support/pass_test_util.h"

namespace kiln::passes::rules {
namespace {

namespace fs = std::filesystem;

const std::string kData = std::string(KILN_SOURCE_DIR) + "/tests/passes/rules/data";

TEST(RuleLoader, BuiltinRulesAreTheFilesOfFusionRules) {
  // Expected names come from the files themselves, not from the loader.
  std::vector<std::string> expected;
  for (const auto &entry : fs::directory_iterator(std::string(KILN_SOURCE_DIR) + "/fusion_rules")) {
    if (entry.path().extension() != ".json" || entry.path().filename() == "fusion_switch.json")
      continue;
    auto doc = readJsonFile(entry.path().string());
    ASSERT_TRUE(doc) << doc.message();
    expected.push_back((*doc)["name"].get<std::string>());
  }
  ASSERT_FALSE(expected.empty());
  auto rules = builtinFusionRules();
  ASSERT_TRUE(rules) << rules.message();
  std::vector<std::string> names;
  for (const FusionRule &r : *rules) {
    names.push_back(r.info.name);
    EXPECT_EQ(r.source.rfind("fusion_rules/", 0), 0u) << r.source;
    EXPECT_GE(r.info.priority, 4200) << r.info.name; // before TbeMatmulFixPipeFusionPass (4295)
    EXPECT_LE(r.info.priority, 4290) << r.info.name;
  }
  std::sort(expected.begin(), expected.end());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, expected);
}

TEST(RuleLoader, FolderSkipsTheSwitchFileAndOtherFiles) {
  auto rules = loadFusionRuleDir(kData + "/good");
  ASSERT_TRUE(rules) << rules.message();
  ASSERT_EQ(rules->size(), 2u); // add_sqrt.json, neg_exp.json; not fusion_switch.json, README.txt
  EXPECT_EQ((*rules)[0].info.name, "AddSqrtFusionRule");
  EXPECT_EQ((*rules)[0].source, kData + "/good/add_sqrt.json");
  EXPECT_EQ((*rules)[0].info.group, PassGroup::GraphFusion);
  EXPECT_FALSE((*rules)[0].info.default_on);
  EXPECT_EQ((*rules)[1].info.name, "NegExpFusionRule");
  EXPECT_EQ((*rules)[1].intermediates, Intermediates::Storage);
}

TEST(RuleLoader, ErrorsNameTheFile) {
  auto bad = loadFusionRuleDir(kData + "/bad");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.message(), kData + "/bad/slu.json: $.pattern.nodes[0].op: unknown op 'Slu' (did "
                                   "you mean Silu?)");
  auto missing = loadFusionRuleDir(kData + "/nowhere");
  ASSERT_FALSE(missing);
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, kData + "/nowhere: not a folder of fusion rules",
                      missing.message());
}

TEST(RuleLoader, RegistryHoldsBuiltinPassesAndRules) {
  auto registry = registryWithFusionRules(PassRegistry::builtin(), {kData + "/good"});
  ASSERT_TRUE(registry) << registry.message();
  for (const Pass *p : PassRegistry::builtin().ordered())
    EXPECT_NE(registry->find(p->info().name), nullptr) << p->info().name;
  auto builtin = builtinFusionRules();
  ASSERT_TRUE(builtin) << builtin.message();
  for (const FusionRule &r : *builtin)
    EXPECT_NE(registry->find(r.info.name), nullptr) << r.info.name;
  const auto *neg_exp = dynamic_cast<const RulePass *>(registry->find("NegExpFusionRule"));
  ASSERT_NE(neg_exp, nullptr);
  EXPECT_EQ(neg_exp->info().priority, 4250);
  // The built-in registry itself is untouched.
  EXPECT_EQ(PassRegistry::builtin().find("NegExpFusionRule"), nullptr);
}

TEST(RuleLoader, NameDefinedTwiceSaysWhichFiles) {
  auto dup = registryWithFusionRules(PassRegistry::builtin(), {kData + "/good", kData + "/dup"});
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.message(), kData +
                               "/dup/again.json: $.name: pass 'NegExpFusionRule' is defined "
                               "twice (also by " +
                               kData + "/good/neg_exp.json)");
  auto clash = registryWithFusionRules(PassRegistry::builtin(), {kData + "/clash"});
  ASSERT_FALSE(clash);
  EXPECT_EQ(clash.message(), kData + "/clash/swiglu_again.json: $.name: pass 'SwiGluFusionRule' is "
                                     "defined twice (also by fusion_rules/swiglu.json)");
}

// exp(-x) and sqrt(a + b): one candidate for each test rule of data/good.
Graph twoCandidates() {
  Graph g("t");
  ValueId x = g.addInput("x", TensorType{DType::F32, {4}}, InputRole::Data);
  ops::OpBuilder b(g);
  g.addOutput("e", b.create("Exp", "exp", {b.create("Neg", "neg", {x})}));
  g.addOutput("s", b.create("Sqrt", "sqrt", {b.create("Add", "add", {x, x})}));
  EXPECT_TRUE(b.status().isOk()) << b.status().message();
  return g;
}

std::vector<std::string> formedBy(const Graph &g) {
  std::vector<std::string> out;
  for (const FusionGroup &group : g.groups())
    out.push_back(group.formed_by);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(RuleLoader, RulesAreSwitchedLikePasses) {
  // Only the test rules: other passes must not touch the candidates.
  auto rules = loadFusionRuleDir(kData + "/good");
  ASSERT_TRUE(rules) << rules.message();
  PassRegistry registry;
  ASSERT_TRUE(addFusionRules(registry, std::move(*rules)).isOk());
  using testing::contextFor;
  using testing::switchPasses;

  Graph defaults = twoCandidates();
  PipelineReport report =
      testing::runPasses(defaults, contextFor("ascend910b", {}, registry), registry);
  EXPECT_EQ(formedBy(defaults), std::vector<std::string>{"NegExpFusionRule"});
  const PassRecord *off = report.find("AddSqrtFusionRule");
  ASSERT_NE(off, nullptr);
  EXPECT_FALSE(off->enabled);
  EXPECT_FALSE(off->ran);
  EXPECT_EQ(off->result.match_times, 0);

  Graph switched = twoCandidates();
  testing::runPasses(
      switched,
      contextFor("ascend910b",
                 {switchPasses({{"NegExpFusionRule", false}, {"AddSqrtFusionRule", true}})},
                 registry),
      registry);
  EXPECT_EQ(formedBy(switched), std::vector<std::string>{"AddSqrtFusionRule"});
}

} // namespace
} // namespace kiln::passes::rules
