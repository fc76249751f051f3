// SequenceRegatherPass on one rank's training step of the tiny Qwen under
// tensor and sequence parallelism: every gather the backward reads gets a
// copy the backward reads instead, so the gathered sequence no longer lives
// from the forward to the backward; without sequence parallelism there is
// nothing to gather.
#include <gtest/gtest.h>

#include "compiler/autodiff/training_step.h"
#include "compiler/frontend/model_loader.h"
#include "ops/op_verifier.h"
#include "passes/memory/recompute_pass.h"

namespace kiln::testing {
namespace {

Graph rankStep(bool sequence_parallel) {
  frontend::ModelOptions options;
  options.batch = 2;
  options.seq = 8;
  options.tensor_parallel = 2;
  options.sequence_parallel = sequence_parallel;
  auto model = frontend::loadModel(std::string(KILN_SOURCE_DIR) + "/examples/qwen-tiny/config.json",
                                   options);
  EXPECT_TRUE(model) << model.message();
  auto step = autodiff::buildTrainingStep(model->graph, {});
  EXPECT_TRUE(step) << step.message();
  return std::move(*step);
}

// Whether a node outside the forward (the backward, the update) reads the
// output of the node named `name` or of a Reshape viewing it.
bool backwardReads(const Graph &g, const std::string &name) {
  const std::vector<bool> forward = passes::forwardNodes(g);
  const auto users = g.computeUsers();
  std::vector<NodeId> views{g.findNode(name)};
  for (size_t k = 0; k < views.size(); ++k)
    for (ValueId out : g.node(views[k]).outputs)
      for (NodeId u : users[out]) {
        if (!forward[u])
          return true;
        if (g.node(u).op == "Reshape")
          views.push_back(u);
      }
  return false;
}

TEST(SequenceRegatherPass, TheBackwardGathersTheSlicesAgain) {
  Graph g = rankStep(true);
  const std::vector<bool> forward = passes::forwardNodes(g);
  std::vector<std::string> gathers;
  for (NodeId id = 0; id < static_cast<NodeId>(g.numNodes()); ++id)
    if (forward[id] && g.node(id).op == "TensorParallelAllGather") {
      gathers.push_back(g.node(id).name);
      EXPECT_TRUE(backwardReads(g, gathers.back())) << gathers.back();
    }
  // Before each layer's attention and MLP, and before lm_head.
  ASSERT_EQ(gathers.size(), 5u);

  passes::PassResult result = passes::regatherSequenceSlices(g);
  EXPECT_EQ(result.effect_times, 5);
  ASSERT_TRUE(g.compact());
  ASSERT_TRUE(ops::verifyGraph(g));
  for (const std::string &name : gathers) {
    EXPECT_FALSE(backwardReads(g, name)) << name << ": the backward still reads the forward's";
    const NodeId copy = g.findNode("recompute." + name);
    ASSERT_NE(copy, kNoNode) << name;
    EXPECT_EQ(g.node(copy).op, "TensorParallelAllGather");
    EXPECT_EQ(g.node(copy).inputs, g.node(g.findNode(name)).inputs) << "the same slice";
    EXPECT_TRUE(backwardReads(g, "recompute." + name)) << name;
  }
}

TEST(SequenceRegatherPass, WithoutSequenceParallelismThereIsNothingToGather) {
  Graph g = rankStep(false);
  const size_t nodes = g.numNodes();
  passes::PassResult result = passes::regatherSequenceSlices(g);
  EXPECT_EQ(result.match_times, 0);
  EXPECT_EQ(g.numNodes(), nodes);
}

} // namespace
} // namespace kiln::testing
