// Fuzzes the declarative fusion-rule reader (fusion_rules/*.json,
// --fusion-rules DIR) and adds an accepted rule to a copy of the registry.
#include "passes/fusion/rules/fusion_rule.h"
#include "passes/fusion/rules/rule_loader.h"
#include "passes/pass_registry.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace kiln;
  constexpr std::string_view kSource = "fuzz/rule.json";
  const auto &builtin = passes::PassRegistry::builtin();
  auto rule = passes::rules::parseFusionRuleText(fuzz::asText(data, size), kSource, builtin);
  fuzz::requireNamesSource(rule, kSource);
  if (!rule)
    return 0;
  passes::PassRegistry registry = builtin;
  (void)passes::rules::addFusionRules(registry, {std::move(*rule)});
  return 0;
}
