// Pass options (passes/pass_options.h): declared beside the pass with a type
// and a default, parsed once, checked by name and by type with coded errors,
// and read by the pass from its context.
#include <gtest/gtest.h>

#include "passes/memory/recompute_settings.h"
#include "passes/pass_context.h"
#include "passes/pass_options.h"
#include "passes/pass_registry.h"
#include "passes/precision/precision_settings.h"
#include "target/target.h"

namespace kiln::passes {
namespace {

const PassOptionInfo kLayers{.name = "layers", .type = PassOptionType::IntSet};
const PassOptionInfo kMode{.name = "mode",
                           .type = PassOptionType::Choice,
                           .default_value = "none",
                           .choices = {"none", "full"}};

TEST(PassOptions, EachTypeParsesWhatItTakes) {
  const PassOptionInfo flag{.name = "on", .type = PassOptionType::Bool};
  const PassOptionInfo count{.name = "n", .type = PassOptionType::Int};
  EXPECT_EQ(std::get<bool>(*parsePassOption(flag, "true")), true);
  EXPECT_EQ(std::get<bool>(*parsePassOption(flag, "false")), false);
  EXPECT_EQ(std::get<int64_t>(*parsePassOption(count, "-12")), -12);
  EXPECT_EQ(std::get<std::set<int64_t>>(*parsePassOption(kLayers, "3, 0,3")),
            (std::set<int64_t>{0, 3}));
  EXPECT_TRUE(std::get<std::set<int64_t>>(*parsePassOption(kLayers, "")).empty());
  EXPECT_EQ(std::get<std::string>(*parsePassOption(kMode, "full")), "full");
}

TEST(PassOptions, AValueItsTypeRefusesIsCoded) {
  const PassOptionInfo flag{.name = "on", .type = PassOptionType::Bool};
  const PassOptionInfo count{.name = "n", .type = PassOptionType::Int};
  for (const auto &[option, text] :
       std::vector<std::pair<PassOptionInfo, std::string>>{{flag, "yes"},
                                                           {count, "12x"},
                                                           {count, ""},
                                                           {kLayers, "1,,2"},
                                                           {kLayers, "-1"},
                                                           {kMode, "half"}}) {
    Expected<PassOptionValue> v = parsePassOption(option, text);
    ASSERT_FALSE(v) << option.name << "=" << text;
    EXPECT_EQ(v.error().code(), kErrBadPassOptionValue) << v.message();
  }
}

TEST(PassOptions, ValuesRoundTripThroughTheirText) {
  for (const std::string text : {"0,2,7", ""})
    EXPECT_EQ(passOptionText(*parsePassOption(kLayers, text)), text);
  EXPECT_EQ(passOptionText(*parsePassOption(kMode, "full")), "full");
}

TEST(PassOptions, DefaultsUntilSetThenTheSettingAndItsSource) {
  PassOptions options({kLayers, kMode});
  EXPECT_TRUE(options.getInts("layers").empty());
  EXPECT_EQ(options.getChoice("mode"), "none");
  EXPECT_EQ(options.source("mode"), "built-in default");
  ASSERT_TRUE(options.set(kMode, "full", "--pass-option"));
  EXPECT_EQ(options.getChoice("mode"), "full");
  EXPECT_EQ(options.source("mode"), "--pass-option");
  EXPECT_FALSE(options.set(kMode, "half", "--pass-option"));
  EXPECT_EQ(options.getChoice("mode"), "full") << "a refused value changes nothing";
}

TEST(PassOptions, ASettingIsPassDotOptionEqualsValue) {
  auto s = parsePassOptionSetting("RecomputePass.layers=0,3", "--pass-option");
  ASSERT_TRUE(s) << s.message();
  EXPECT_EQ(s->pass, "RecomputePass");
  EXPECT_EQ(s->option, "layers");
  EXPECT_EQ(s->value, "0,3");
  for (const char *bad : {"RecomputePass", "RecomputePass.mode", ".mode=full", "Recompute=full",
                          "RecomputePass.=full"}) {
    auto b = parsePassOptionSetting(bad, "--pass-option");
    ASSERT_FALSE(b) << bad;
    EXPECT_EQ(b.error().code(), kErrBadPassOptionValue) << bad;
  }
}

TEST(PassOptions, TheRegistryChecksPassAndOptionNames) {
  const PassRegistry &registry = PassRegistry::builtin();
  auto unknown_pass = resolvePassOptions(registry, {{"RecomputPass", "mode", "full", "job.json"}});
  ASSERT_FALSE(unknown_pass);
  EXPECT_EQ(unknown_pass.error().code(), kErrUnknownPassOption);
  auto unknown_option =
      resolvePassOptions(registry, {{"RecomputePass", "mod", "full", "job.json"}});
  ASSERT_FALSE(unknown_option);
  EXPECT_EQ(unknown_option.error().code(), kErrUnknownPassOption);
  auto none = resolvePassOptions(registry, {{"DeadCodeEliminationPass", "x", "1", "job.json"}});
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code(), kErrUnknownPassOption);
  auto bad_value = resolvePassOptions(registry, {{"RecomputePass", "mode", "half", "job.json"}});
  ASSERT_FALSE(bad_value);
  EXPECT_EQ(bad_value.error().code(), kErrBadPassOptionValue);
}

TEST(PassOptions, ALaterSettingBeatsAnEarlierOne) {
  auto options = resolvePassOptions(PassRegistry::builtin(),
                                    {{"RecomputePass", "mode", "selective", "job.json"},
                                     {"RecomputePass", "mode", "full", "--pass-option"}});
  ASSERT_TRUE(options) << options.message();
  EXPECT_EQ(options->at("RecomputePass").getChoice("mode"), "full");
  EXPECT_EQ(options->at("RecomputePass").source("mode"), "--pass-option");
  EXPECT_TRUE(options->at(kAttentionFp32CastPassName).getInts("layers").empty());
}

// Every declared default parses as its own type, so no pass can ship one
// that only fails when a job leaves it alone.
TEST(PassOptions, EveryBuiltinDefaultParses) {
  int declared = 0;
  for (const Pass *p : PassRegistry::builtin().ordered())
    for (const PassOptionInfo &o : p->info().options) {
      ++declared;
      EXPECT_TRUE(parsePassOption(o, o.default_value)) << p->info().name << "." << o.name;
      EXPECT_FALSE(o.description.empty()) << p->info().name << "." << o.name;
    }
  EXPECT_GE(declared, 3) << "RecomputePass's mode and layers, AttentionFp32CastPass's layers";
}

TEST(PassOptions, AContextGivesEachPassItsOptions) {
  auto target = target::loadTarget("ascend910b");
  ASSERT_TRUE(target) << target.message();
  PassContext ctx(*target, {});
  EXPECT_EQ(recomputeSettings(ctx).mode, RecomputeMode::None) << "the declared default";
  const Pass *recompute = PassRegistry::builtin().find(kRecomputePassName);
  ASSERT_NE(recompute, nullptr);
  EXPECT_FALSE(recompute->appliesTo(ctx).allowed());
  ASSERT_TRUE(ctx.setOption(*recompute, "mode", "full", "--recompute"));
  ASSERT_TRUE(ctx.setOption(*recompute, "layers", "1", "--recompute-layers"));
  EXPECT_EQ(recomputeSettings(ctx).toString(), "full (layers 1)");
  EXPECT_TRUE(recompute->appliesTo(ctx).allowed());
  Status unknown = ctx.setOption(*recompute, "depth", "2", "--pass-option");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code(), kErrUnknownPassOption);
}

} // namespace
} // namespace kiln::passes
