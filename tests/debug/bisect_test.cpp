// The bisection on a scripted failure: it finds the pass by group and by
// prefix, then the application, in few trials; and keepFirstGroups ungroups.
#include <gtest/gtest.h>

#include "debug/bisect.h"
#include "tests/support/pass_test_util.h"

namespace kiln::testing {
namespace {

using passes::PassGroup;

const std::vector<debug::BisectCandidate> kPipeline = {
    {"CleanupA", PassGroup::Cleanup, 0},  {"PrecisionB", PassGroup::Precision, 0},
    {"FuseC", PassGroup::GraphFusion, 0}, {"FuseD", PassGroup::UBFusion, 40},
    {"FuseE", PassGroup::UBFusion, 12},
};

bool on(const debug::BisectTrial &t, const std::string &pass) {
  return std::find(t.disabled.begin(), t.disabled.end(), pass) == t.disabled.end();
}

std::string nth(const std::string &pass, int64_t n) {
  return "fused." + pass + "." + std::to_string(n);
}

TEST(Bisect, FindsThePassAndItsApplication) {
  // FuseD's 17th group (and any later one) breaks the compile.
  debug::BisectPredicate fails = [](const debug::BisectTrial &t) -> Expected<bool> {
    if (!on(t, "FuseD"))
      return false;
    return t.limited_pass != "FuseD" || t.keep_groups >= 17;
  };
  auto r = debug::bisect(kPipeline, fails, nth);
  ASSERT_TRUE(r.isOk()) << r.message();
  EXPECT_TRUE(r->job_fails);
  EXPECT_FALSE(r->fails_without_passes);
  EXPECT_EQ(r->culprit, "FuseD");
  EXPECT_EQ(r->culprit_group, "UBFusion");
  EXPECT_EQ(r->application, 17);
  EXPECT_EQ(r->applications, 40);
  EXPECT_EQ(r->group_name, "fused.FuseD.17");
  EXPECT_LE(r->trials, 2 + 4 + 3 + 6);
  EXPECT_EQ(r->disableFlag(), "--disable-pass FuseD");
  EXPECT_EQ(r->switchSnippet(), R"({"Switch": {"UBFusion": {"FuseD": "off"}}})");
  EXPECT_NE(r->toText().find("culprit: FuseD (UBFusion), application 17 of 40"), std::string::npos)
      << r->toText();
}

TEST(Bisect, APassThatFormsNoGroupsStopsAtThePass) {
  debug::BisectPredicate fails = [](const debug::BisectTrial &t) -> Expected<bool> {
    return on(t, "PrecisionB");
  };
  auto r = debug::bisect(kPipeline, fails, nth);
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r->culprit, "PrecisionB");
  EXPECT_EQ(r->application, 0);
}

TEST(Bisect, NoFailureAndNotAPassFailure) {
  auto never = debug::bisect(
      kPipeline, [](const debug::BisectTrial &) -> Expected<bool> { return false; }, nth);
  ASSERT_TRUE(never.isOk());
  EXPECT_FALSE(never->job_fails);
  EXPECT_NE(never->toText().find("does not fail"), std::string::npos);
  auto always = debug::bisect(
      kPipeline, [](const debug::BisectTrial &) -> Expected<bool> { return true; }, nth);
  ASSERT_TRUE(always.isOk());
  EXPECT_TRUE(always->fails_without_passes);
  EXPECT_TRUE(always->culprit.empty());
}

TEST(Bisect, PredicateErrorsAbort) {
  auto r = debug::bisect(
      kPipeline, [](const debug::BisectTrial &) -> Expected<bool> { return Error("boom"); }, nth);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.message(), "boom");
}

TEST(Bisect, KeepFirstGroupsUngroupsTheRest) {
  TinyTrainingStep step = tinyTrainingStep(DType::F16);
  runPasses(step.graph, contextFor("ascend910b"));
  const std::vector<std::string> before = debug::groupsFormedBy(step.graph, "RmsNormFusionPass");
  ASSERT_GE(before.size(), 3u);
  ASSERT_TRUE(debug::keepFirstGroups(step.graph, "RmsNormFusionPass", 2).isOk());
  const std::vector<std::string> after = debug::groupsFormedBy(step.graph, "RmsNormFusionPass");
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0], before[0]);
  EXPECT_EQ(after[1], before[1]);
  EXPECT_FALSE(debug::groupsFormedBy(step.graph, "SoftmaxFusionPass").empty()) << "others stay";
}

} // namespace
} // namespace kiln::testing
