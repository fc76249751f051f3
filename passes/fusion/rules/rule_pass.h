// A fusion rule as a pass: its PassInfo comes from the rule file, and running
// it forms one fused group per legal match of the pattern.
#pragma once

#include "passes/fusion/rules/fusion_rule.h"
#include "passes/pass.h"

namespace kiln::passes::rules {

// Anchors the pattern at every node in graph order. match_times counts roots
// whose op and structure matched; effect_times the groups formed; every
// other structural match is a rejection saying why. An error naming the rule
// when its matcher runs past its search budget (pattern_matcher.h).
Expected<PassResult> applyFusionRule(Graph &graph, const FusionRule &rule);

class RulePass final : public Pass {
public:
  explicit RulePass(FusionRule rule) : rule_(std::move(rule)) {}

  const PassInfo &info() const override { return rule_.info; }
  Expected<PassResult> run(Graph &graph, const PassContext &) const override {
    return applyFusionRule(graph, rule_);
  }
  const FusionRule &rule() const { return rule_; }

private:
  FusionRule rule_;
};

} // namespace kiln::passes::rules
