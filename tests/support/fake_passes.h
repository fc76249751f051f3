// Small passes with known behaviour for testing the pass infrastructure
// without depending on what the real passes find in a graph.
#pragma once

#include <memory>
#include <string>

#include "passes/pass.h"
#include "passes/pass_registry.h"

namespace kiln::testing {

// Records that it ran by counting the graph's nodes; changes nothing unless
// `rename_to` is set, in which case it renames the first node (a change).
class FakePass : public passes::Pass {
public:
  explicit FakePass(passes::PassInfo info, std::string rename_to = {})
      : info_(std::move(info)), rename_to_(std::move(rename_to)) {}
  const passes::PassInfo &info() const override { return info_; }
  Expected<passes::PassResult> run(Graph &graph, const passes::PassContext &) const override {
    passes::PassResult r;
    r.match_times = static_cast<int64_t>(graph.numNodes());
    if (!rename_to_.empty() && graph.numNodes() > 0) {
      graph.node(0).name = rename_to_;
      r.effect_times = 1;
    }
    return r;
  }

private:
  passes::PassInfo info_;
  std::string rename_to_;
};

inline passes::PassInfo fakeInfo(std::string name, passes::PassGroup group, int priority,
                                 bool default_on = true, bool may_disable = true) {
  passes::PassInfo info;
  info.name = std::move(name);
  info.group = group;
  info.priority = priority;
  info.default_on = default_on;
  info.may_disable = may_disable;
  if (!may_disable)
    info.required_because = "the test needs it";
  info.summary = "a test pass";
  return info;
}

// GraphFusion: GfA (on), GfB (on), GfOff (off by default);
// UBFusion: UbA (on), UbRequired (may not be disabled).
inline passes::PassRegistry fakeRegistry() {
  using passes::PassGroup;
  passes::PassRegistry r;
  auto add = [&](passes::PassInfo info) {
    Status s = r.add(std::make_shared<FakePass>(std::move(info)));
    (void)s;
  };
  add(fakeInfo("GfA", PassGroup::GraphFusion, 10));
  add(fakeInfo("GfB", PassGroup::GraphFusion, 20));
  add(fakeInfo("GfOff", PassGroup::GraphFusion, 30, false));
  add(fakeInfo("UbA", PassGroup::UBFusion, 10));
  add(fakeInfo("UbRequired", PassGroup::UBFusion, 20, true, false));
  return r;
}

} // namespace kiln::testing
