// A declarative fusion rule: one JSON file (format "kiln.fusion-rule",
// version 1; the schema is in docs/fusion-rules.md) that names a pass, a
// pattern of ops and the kernel a match becomes. The parser reports every
// problem as "<file>: <json path>: <what is wrong>".
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "ir/graph.h"
#include "ops/op_registry.h"
#include "passes/fusion/rules/pattern.h"
#include "passes/pass.h"
#include "passes/pass_registry.h"
#include "support/error.h"

namespace kiln::passes::rules {

inline constexpr int kFusionRuleVersion = 1;

struct FusionRule {
  PassInfo info;      // the pass the rule becomes
  std::string kernel; // FusionGroup::kernel of the groups it forms
  Intermediates intermediates = Intermediates::Storage;
  Pattern pattern;
  std::string source; // the file it came from
};

// `builtin` holds the C++ passes: a rule may not take one of their names.
Expected<FusionRule> parseFusionRule(const nlohmann::json &doc, std::string_view source,
                                     const PassRegistry &builtin,
                                     const ops::OpRegistry &ops = ops::OpRegistry::builtin());
// The same from the file's text; a JSON syntax error names the line and column.
Expected<FusionRule> parseFusionRuleText(std::string_view text, std::string_view source,
                                         const PassRegistry &builtin,
                                         const ops::OpRegistry &ops = ops::OpRegistry::builtin());

} // namespace kiln::passes::rules
