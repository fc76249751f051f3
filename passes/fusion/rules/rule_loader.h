// Where fusion rules come from: the files of fusion_rules/ embedded in the
// binary, and a job's own folders (--fusion-rules DIR). A job's registry is a
// copy of the built-in passes plus these rules, one RulePass per rule.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "passes/fusion/rules/fusion_rule.h"
#include "passes/pass_registry.h"
#include "support/error.h"

namespace kiln::passes::rules {

// The file in a rules folder that holds the folder's default switches (CANN
// format), not a rule; the loaders skip it.
inline constexpr std::string_view kDefaultSwitchFileName = "fusion_switch.json";

// The rules of fusion_rules/*.json, in file name order. `builtin` holds the
// C++ passes whose names a rule may not take.
Expected<std::vector<FusionRule>>
builtinFusionRules(const PassRegistry &builtin = PassRegistry::builtin());

// Every *.json of `dir` but fusion_switch.json, in file name order; an error
// names the file and the JSON path. Patterns may name the ops of `ops` (a
// job's custom ops).
Expected<std::vector<FusionRule>>
loadFusionRuleDir(const std::string &dir, const PassRegistry &builtin = PassRegistry::builtin(),
                  const ops::OpRegistry &ops = ops::OpRegistry::builtin());

// Adds one RulePass per rule to `registry`. A name the registry has already
// is an error naming the rule's file and, for another rule, that one's file.
Status addFusionRules(PassRegistry &registry, std::vector<FusionRule> rules);

// A copy of `base` with the built-in rules and then the rules of each of
// `rule_dirs` added, whose patterns may name the ops of `ops`: the registry a
// job runs with.
Expected<PassRegistry>
registryWithFusionRules(const PassRegistry &base, const std::vector<std::string> &rule_dirs = {},
                        const ops::OpRegistry &ops = ops::OpRegistry::builtin());

} // namespace kiln::passes::rules
