// Fusion switches: CANN's formats, precedence of the layers, ALL semantics,
// unknown and required passes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "passes/pass_switches.h"
#include "tests/support/fake_passes.h"
#include "tests/support/pass_test_util.h"

namespace kiln::passes {
namespace {

using kiln::testing::fakeRegistry;
using kiln::testing::switchAll;
using kiln::testing::switchPasses;

SwitchLayer cann(const std::string &text, const std::string &source = "switch.json") {
  auto layer = parseSwitchObject(nlohmann::json::parse(text), source);
  EXPECT_TRUE(layer) << layer.message();
  return layer ? *layer : SwitchLayer{};
}

struct PrecedenceCase {
  const char *what;
  std::vector<SwitchLayer> layers; // lowest precedence first
  std::map<std::string, bool> expected;
};

// The table: each row applies its layers to the fake registry's defaults
// (GfA on, GfB on, GfOff off, UbA on, UbRequired on and required).
TEST(PassSwitches, PrecedenceTable) {
  using G = PassGroup;
  const std::vector<PrecedenceCase> cases = {
      {"defaults", {}, {{"GfA", true}, {"GfB", true}, {"GfOff", false}, {"UbA", true}}},
      {"ALL off turns the group off",
       {switchAll(G::GraphFusion, false)},
       {{"GfA", false}, {"GfB", false}, {"GfOff", false}, {"UbA", true}}},
      {"ALL off leaves required passes on",
       {switchAll(G::UBFusion, false)},
       {{"UbA", false}, {"UbRequired", true}}},
      {"a single pass beats ALL in the same layer",
       {cann(R"({"Switch":{"GraphFusion":{"GfA":"on","ALL":"off"}}})")},
       {{"GfA", true}, {"GfB", false}}},
      {"order inside the layer does not matter",
       {cann(R"({"Switch":{"GraphFusion":{"ALL":"off","GfA":"on"}}})")},
       {{"GfA", true}, {"GfB", false}}},
      {"ALL on changes nothing from the defaults",
       {switchAll(G::GraphFusion, true)},
       {{"GfA", true}, {"GfB", true}, {"GfOff", false}}},
      {"ALL on in a higher layer restores defaults",
       {switchAll(G::GraphFusion, false, "low"), switchAll(G::GraphFusion, true, "high")},
       {{"GfA", true}, {"GfOff", false}}},
      {"a higher layer's ALL beats a lower single pass",
       {switchPasses({{"GfA", true}}, "low"), switchAll(G::GraphFusion, false, "high")},
       {{"GfA", false}}},
      {"a higher single pass beats a lower ALL",
       {switchAll(G::GraphFusion, false, "low"), switchPasses({{"GfB", true}}, "high")},
       {{"GfA", false}, {"GfB", true}}},
      {"an off-by-default pass can be turned on",
       {switchPasses({{"GfOff", true}})},
       {{"GfOff", true}}},
      {"the last layer wins",
       {switchPasses({{"UbA", false}}, "job"), switchPasses({{"UbA", true}}, "cli")},
       {{"UbA", true}}},
      {"groups are independent", {switchAll(G::UBFusion, false)}, {{"GfA", true}}},
  };
  const PassRegistry registry = fakeRegistry();
  for (const PrecedenceCase &c : cases) {
    auto res = resolveSwitches(registry, c.layers, false);
    ASSERT_TRUE(res) << c.what << ": " << res.message();
    for (const auto &[pass, on] : c.expected)
      EXPECT_EQ(res->enabled.at(pass), on) << c.what << ": " << pass;
  }
}

TEST(PassSwitches, DecidedByNamesTheLayer) {
  auto res = resolveSwitches(
      fakeRegistry(),
      {switchAll(PassGroup::GraphFusion, false, "job.json"), switchPasses({{"GfB", true}}, "cli")},
      false);
  ASSERT_TRUE(res) << res.message();
  EXPECT_EQ(res->decided_by.at("UbA"), "built-in default");
  EXPECT_NE(res->decided_by.at("GfA").find("job.json"), std::string::npos);
  EXPECT_NE(res->decided_by.at("GfA").find("ALL off"), std::string::npos);
  EXPECT_NE(res->decided_by.at("GfB").find("cli"), std::string::npos);
}

TEST(PassSwitches, UnknownPassSuggestsNearestNames) {
  auto res = resolveSwitches(fakeRegistry(), {switchPasses({{"GfAA", false}}, "job.json")}, false);
  ASSERT_FALSE(res);
  EXPECT_NE(res.message().find("unknown pass 'GfAA'"), std::string::npos) << res.message();
  EXPECT_NE(res.message().find("did you mean GfA"), std::string::npos) << res.message();
  EXPECT_NE(res.message().find("job.json"), std::string::npos) << res.message();
}

TEST(PassSwitches, AllowUnknownWarnsForCannFilesOnly) {
  SwitchLayer file = cann(R"({"Switch":{"UBFusion":{"TbeConvBnreluFusionPass":"off"}}})");
  auto res = resolveSwitches(fakeRegistry(), {file}, true);
  ASSERT_TRUE(res) << res.message();
  ASSERT_EQ(res->warnings.size(), 1u);
  EXPECT_NE(res->warnings[0].find("TbeConvBnreluFusionPass"), std::string::npos);
  EXPECT_NE(res->warnings[0].find("$.Switch.UBFusion.TbeConvBnreluFusionPass"), std::string::npos)
      << res->warnings[0];

  SwitchLayer flags = switchPasses({{"Nope", false}}, "--disable-pass");
  flags.cann_format = false;
  EXPECT_FALSE(resolveSwitches(fakeRegistry(), {flags}, true));
}

TEST(PassSwitches, DisablingARequiredPassSaysWhy) {
  auto res = resolveSwitches(fakeRegistry(), {switchPasses({{"UbRequired", false}}, "cli")}, false);
  ASSERT_FALSE(res);
  EXPECT_NE(res.message().find("may not be disabled: the test needs it"), std::string::npos)
      << res.message();
}

// CANN files list some passes under the other fusion group than kiln does:
// the setting applies, with a note saying where kiln files the pass.
TEST(PassSwitches, PassUnderTheOtherGroupAppliesWithANote) {
  SwitchLayer file = cann(R"({"Switch":{"GraphFusion":{"UbA":"off"}}})");
  auto res = resolveSwitches(fakeRegistry(), {file}, false);
  ASSERT_TRUE(res) << res.message();
  EXPECT_FALSE(res->enabled.at("UbA"));
  ASSERT_EQ(res->notes.size(), 1u);
  EXPECT_NE(res->notes[0].find("$.Switch.GraphFusion.UbA: UbA is a UBFusion pass in kiln, listed "
                               "under GraphFusion"),
            std::string::npos)
      << res->notes[0];
  EXPECT_TRUE(res->warnings.empty());
}

TEST(PassSwitches, CannJsonErrorsNameTheFileAndPath) {
  auto bad_state =
      parseSwitchObject(nlohmann::json::parse(R"({"Switch":{"UBFusion":{"X":"of"}}})"), "f.json");
  ASSERT_FALSE(bad_state);
  EXPECT_NE(bad_state.message().find("f.json: $.Switch.UBFusion.X: expected \"on\" or \"off\""),
            std::string::npos)
      << bad_state.message();
  auto bad_group =
      parseSwitchObject(nlohmann::json::parse(R"({"Switch":{"UbFusion":{}}})"), "f.json");
  ASSERT_FALSE(bad_group);
  EXPECT_NE(bad_group.message().find("$.Switch.UbFusion: unknown pass group"), std::string::npos)
      << bad_group.message();
  auto no_switch = parseSwitchObject(nlohmann::json::parse(R"({"switch":{}})"), "f.json");
  ASSERT_FALSE(no_switch);
  EXPECT_NE(no_switch.message().find("f.json: $.switch: unknown field"), std::string::npos)
      << no_switch.message();
}

TEST(PassSwitches, LineFormat) {
  auto layer = parseSwitchLines("# old style\nGfA:off\n  UbA : on \n\n", "old.cfg");
  ASSERT_TRUE(layer) << layer.message();
  auto res = resolveSwitches(fakeRegistry(), {*layer}, false);
  ASSERT_TRUE(res) << res.message();
  EXPECT_FALSE(res->enabled.at("GfA"));
  EXPECT_TRUE(res->enabled.at("UbA"));
  EXPECT_NE(res->decided_by.at("GfA").find("old.cfg: line 2"), std::string::npos);

  auto no_colon = parseSwitchLines("GfA off\n", "old.cfg");
  ASSERT_FALSE(no_colon);
  EXPECT_NE(no_colon.message().find("old.cfg: line 1: expected 'PassName:off'"), std::string::npos)
      << no_colon.message();
  auto bad_state = parseSwitchLines("GfA:maybe\n", "old.cfg");
  ASSERT_FALSE(bad_state);
  EXPECT_NE(bad_state.message().find("'maybe'"), std::string::npos);
}

} // namespace
} // namespace kiln::passes
