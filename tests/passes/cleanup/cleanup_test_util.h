// Helpers for the cleanup pass tests: contexts in which only chosen cleanup passes
// run, and exact comparison with the reference interpreter.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ir/graph.h"
#include "ir/printer.h"
#include "ops/interpreter.h"
#include "ops/op_verifier.h"
#include "passes/pass_registry.h"
#include "tests/support/pass_test_util.h"

namespace kiln::testing {

inline const std::vector<std::string> kCleanupPasses = {
    "ConstantFoldingPass", "ReshapeTransposeFoldingPass", "CommonSubexpressionEliminationPass",
    "DeadCodeEliminationPass"};

// A context where only the cleanup passes in `on` run: every other group is
// switched off, and so is every other cleanup pass.
inline passes::PassContext onlyCleanup(const std::vector<std::string> &on,
                                       const std::string &target = "ascend910b") {
  passes::SwitchLayer layer;
  layer.source = "test";
  for (passes::PassGroup g :
       {passes::PassGroup::Precision, passes::PassGroup::GraphFusion, passes::PassGroup::UBFusion})
    layer.all[g] = false;
  for (const std::string &name : kCleanupPasses) {
    bool enabled = std::find(on.begin(), on.end(), name) != on.end();
    layer.passes.push_back({name, enabled});
    layer.locations.push_back(name);
    layer.listed_groups.push_back(std::nullopt);
  }
  return contextFor(target, {layer});
}

inline std::string textOf(const Graph &graph) {
  PrintOptions options;
  options.provenance = true;
  return graphToText(graph, options);
}

// The other groups off and `pass` off; the other cleanup passes keep their
// defaults, so a graph only `pass` would change stays as it is.
inline passes::PassContext withoutPass(const std::string &pass,
                                       const std::string &target = "ascend910b") {
  return contextFor(target,
                    {switchAll(passes::PassGroup::Precision, false),
                     switchAll(passes::PassGroup::GraphFusion, false),
                     switchAll(passes::PassGroup::UBFusion, false), switchPasses({{pass, false}})});
}

// Runs the pipeline with `pass` on (only it) and with it off (the other
// cleanup passes on): on changes `graph`, off leaves it exactly as it was.
inline void expectSwitchDecides(const Graph &graph, const std::string &pass) {
  Graph on = graph, off = graph;
  const std::string text = textOf(graph);
  passes::PipelineReport ron = runPasses(on, onlyCleanup({pass}));
  ASSERT_NE(ron.find(pass), nullptr);
  EXPECT_TRUE(ron.find(pass)->ran);
  EXPECT_GT(ron.find(pass)->result.effect_times, 0);
  EXPECT_NE(textOf(on), text);

  passes::PipelineReport roff = runPasses(off, withoutPass(pass));
  ASSERT_NE(roff.find(pass), nullptr);
  EXPECT_FALSE(roff.find(pass)->enabled);
  EXPECT_FALSE(roff.find(pass)->ran);
  EXPECT_EQ(textOf(off), text);
}

inline ops::TensorMap interpretOk(const Graph &graph, const ops::TensorMap &feed,
                                  OverflowMode mode = OverflowMode::InfNan) {
  ops::InterpretOptions options;
  options.overflow = mode;
  auto out = ops::interpret(graph, feed, options);
  EXPECT_TRUE(out) << out.message();
  return out ? *out : ops::TensorMap{};
}

// The rewritten graph computes exactly what the original does on the
// reference interpreter: the same bits in every output.
inline ::testing::AssertionResult sameResults(const Graph &original, const Graph &rewritten,
                                              const ops::TensorMap &feed,
                                              OverflowMode mode = OverflowMode::InfNan) {
  ops::TensorMap expected = interpretOk(original, feed, mode);
  ops::TensorMap actual = interpretOk(rewritten, feed, mode);
  if (expected.empty() || expected.size() != actual.size())
    return ::testing::AssertionFailure()
           << expected.size() << " vs " << actual.size() << " outputs";
  for (const auto &[name, e] : expected) {
    auto it = actual.find(name);
    if (it == actual.end())
      return ::testing::AssertionFailure() << "output '" << name << "' is missing";
    if (!(it->second == e)) {
      ::testing::AssertionResult near = outputsAgree({{name, e}}, {{name, it->second}}, 0.0, 0.0);
      return ::testing::AssertionFailure()
             << "output '" << name << "' differs in its bits"
             << (near ? std::string() : std::string(": ") + near.message());
    }
  }
  return ::testing::AssertionSuccess();
}

// The node's provenance, as "pass <- a, b".
inline std::string provenanceOf(const Graph &graph, const std::string &node) {
  NodeId id = graph.findNode(node);
  if (id == kNoNode)
    return "<no node " + node + ">";
  const Provenance &p = graph.node(id).provenance;
  std::string s = p.pass + " <-";
  for (size_t i = 0; i < p.origins.size(); ++i)
    s += (i ? ", " : " ") + p.origins[i];
  return s;
}

} // namespace kiln::testing
