// The pass manager: order, switches, targets, instrumentation, verification
// after each pass, and the report.
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "passes/pass_manager.h"
#include "tests/support/fake_passes.h"
#include "tests/support/pass_test_util.h"

namespace kiln::passes {
namespace {

using kiln::testing::contextFor;
using kiln::testing::fakeInfo;
using kiln::testing::FakePass;
using kiln::testing::fakeRegistry;
using kiln::testing::switchPasses;

Graph smallGraph() {
  Graph g("small");
  ValueId x = g.addInput("x", TensorType{DType::F32, {2}}, InputRole::Data);
  NodeId n = g.addNode("Neg", "neg", {x}, {TensorType{DType::F32, {2}}});
  g.addOutput("y", g.node(n).outputs[0]);
  return g;
}

// Not applicable on targets without FixPipe.
class NeedsFixPipe : public FakePass {
public:
  NeedsFixPipe() : FakePass(fakeInfo("NeedsFixPipe", PassGroup::UBFusion, 5)) {}
  Verdict appliesTo(const PassContext &ctx) const override {
    return ctx.target().fixpipe.present ? Verdict::allow()
                                        : Verdict::forbid("no FixPipe on " + ctx.target().name);
  }
};

// Leaves a node reading a value of the wrong type.
class BreaksTypes : public FakePass {
public:
  BreaksTypes() : FakePass(fakeInfo("BreaksTypes", PassGroup::Cleanup, 1)) {}
  Expected<PassResult> run(Graph &graph, const PassContext &) const override {
    graph.addNode("Neg", "bad", {graph.inputs()[0].value}, {TensorType{DType::F16, {2}}});
    return PassResult{};
  }
};

TEST(PassManager, RunsEnabledPassesInOrderAndReportsTheRest) {
  PassRegistry registry = fakeRegistry();
  ASSERT_TRUE(registry.add(std::make_shared<NeedsFixPipe>()).isOk());
  PassContext ctx = contextFor("ascend910", {switchPasses({{"GfB", false}})}, registry);
  Graph g = smallGraph();
  auto report = PassManager(registry, ctx).run(g);
  ASSERT_TRUE(report) << report.message();
  std::vector<std::string> order;
  for (const PassRecord &r : report->passes)
    order.push_back(r.name);
  EXPECT_EQ(order,
            (std::vector<std::string>{"GfA", "GfB", "GfOff", "NeedsFixPipe", "UbA", "UbRequired"}));
  EXPECT_TRUE(report->find("GfA")->ran);
  EXPECT_FALSE(report->find("GfB")->ran);
  EXPECT_FALSE(report->find("GfB")->enabled);
  EXPECT_FALSE(report->find("GfOff")->ran);
  const PassRecord *fixpipe = report->find("NeedsFixPipe");
  EXPECT_TRUE(fixpipe->enabled);
  EXPECT_FALSE(fixpipe->ran);
  EXPECT_EQ(fixpipe->not_applicable, "no FixPipe on ascend910");

  nlohmann::json j = reportToJson(*report, g);
  EXPECT_EQ(j["target"], "ascend910");
  ASSERT_EQ(j["passes"].size(), 6u);
  const nlohmann::json &p = j["passes"][3];
  EXPECT_EQ(p["name"], "NeedsFixPipe");
  EXPECT_EQ(p["applicable"], false);
  EXPECT_EQ(p["reason"], "no FixPipe on ascend910");
  EXPECT_EQ(p["effect_times"], 0);
  for (const char *key : {"group", "enabled", "match_times", "time_ms", "not_fused"})
    EXPECT_TRUE(p.contains(key)) << key;
}

TEST(PassManager, PrintsIrAfterChangedPassesOnly) {
  PassRegistry registry;
  ASSERT_TRUE(
      registry
          .add(std::make_shared<FakePass>(fakeInfo("Renames", PassGroup::Cleanup, 1), "renamed"))
          .isOk());
  ASSERT_TRUE(
      registry.add(std::make_shared<FakePass>(fakeInfo("Quiet", PassGroup::Cleanup, 2))).isOk());
  PassContext ctx = contextFor("ascend910b", {}, registry);
  std::ostringstream out;
  Instrumentation inst;
  inst.print_after = {"changed"};
  inst.print_before = {"Quiet"};
  inst.timing = true;
  inst.statistics = true;
  inst.out = &out;
  Graph g = smallGraph();
  ASSERT_TRUE(PassManager(registry, ctx, inst).run(g));
  const std::string text = out.str();
  EXPECT_NE(text.find("IR Dump After Renames"), std::string::npos) << text;
  EXPECT_EQ(text.find("IR Dump After Quiet"), std::string::npos) << text;
  EXPECT_NE(text.find("IR Dump Before Quiet"), std::string::npos) << text;
  EXPECT_NE(text.find("%renamed"), std::string::npos) << text;
  EXPECT_NE(text.find("pass execution timing report"), std::string::npos);
  EXPECT_NE(text.find("1 effect_times"), std::string::npos) << text;
}

TEST(PassManager, UnknownInstrumentedPassIsAnError) {
  PassRegistry registry = fakeRegistry();
  PassContext ctx = contextFor("ascend910b", {}, registry);
  Instrumentation inst;
  inst.print_after = {"GfAx"};
  Graph g = smallGraph();
  auto report = PassManager(registry, ctx, inst).run(g);
  ASSERT_FALSE(report);
  EXPECT_NE(report.message().find("--print-ir-after: unknown pass 'GfAx' (did you mean GfA"),
            std::string::npos)
      << report.message();
}

TEST(PassManager, InvalidGraphIsBlamedOnThePass) {
  PassRegistry registry;
  ASSERT_TRUE(registry.add(std::make_shared<BreaksTypes>()).isOk());
  PassContext ctx = contextFor("ascend910b", {}, registry);
  Graph g = smallGraph();
  auto report = PassManager(registry, ctx).run(g);
  ASSERT_FALSE(report);
  EXPECT_NE(report.message().find("pass 'BreaksTypes' left an invalid graph"), std::string::npos)
      << report.message();
}

TEST(PassRegistry, DuplicateNamesAreRejected) {
  PassRegistry registry = fakeRegistry();
  Status s = registry.add(std::make_shared<FakePass>(fakeInfo("GfA", PassGroup::UBFusion, 1)));
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("'GfA' is defined twice"), std::string::npos);
}

} // namespace
} // namespace kiln::passes
