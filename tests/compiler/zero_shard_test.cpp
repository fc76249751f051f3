// ZeRO-3's rewrite of the training step: every trained weight becomes its
// flat slice and is gathered once for the forward and once for the
// backward; on one replica (where a gather is the slice itself) the step
// computes exactly what it did.
#include "compiler/parallel/zero_shard.h"

#include <gtest/gtest.h>

#include "ir/tensor_split.h"
#include "ops/interpreter.h"
#include "tests/support/pass_test_util.h"

namespace kiln::parallel {
namespace {

std::set<std::string> trainedWeights(const Graph &g) {
  std::set<std::string> names;
  for (const GraphInput &in : g.inputs())
    if (in.role == InputRole::Parameter)
      names.insert(in.name);
  return names;
}

TEST(ZeroShard, EachWeightIsASliceGatheredForwardAndBackward) {
  testing::TinyTrainingStep step = testing::tinyTrainingStep(DType::F32);
  const std::set<std::string> weights = trainedWeights(step.graph);
  auto sharded = shardWeights(step.graph, weights, 3);
  ASSERT_TRUE(sharded) << sharded.message();
  for (const std::string &name : weights) {
    const TensorType &whole = step.graph.type(step.graph.findInput(name)->value);
    const TensorType &slice = sharded->type(sharded->findInput(name)->value);
    EXPECT_EQ(slice.shape, (Shape{flatSliceElements(whole.numElements(), 3)})) << name;
    for (const char *phase : {".gather.forward", ".gather.backward"}) {
      const NodeId gather = sharded->findNode(name + phase);
      ASSERT_NE(gather, kNoNode) << name << phase;
      EXPECT_EQ(sharded->node(gather).op, "DataParallelGather");
      EXPECT_EQ(sharded->type(sharded->node(gather).outputs[0]), whole) << name;
    }
  }
  auto missing = shardWeights(step.graph, {"no.such.weight"}, 2);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("no.such.weight"), std::string::npos);
}

TEST(ZeroShard, OneReplicasSlicesComputeTheSameBits) {
  testing::TinyTrainingStep step = testing::tinyTrainingStep(DType::F32);
  const std::set<std::string> weights = trainedWeights(step.graph);
  auto sharded = shardWeights(step.graph, weights, 1);
  ASSERT_TRUE(sharded) << sharded.message();
  ops::TensorMap feed = step.feed;
  for (const std::string &name : weights)
    feed[name] = takeFlatSlice(step.feed.at(name), 0, 1);
  auto want = ops::interpret(step.graph, step.feed);
  auto got = ops::interpret(*sharded, feed);
  ASSERT_TRUE(want) << want.message();
  ASSERT_TRUE(got) << got.message();
  ASSERT_EQ(got->size(), want->size());
  for (const auto &[name, t] : *want)
    EXPECT_TRUE(got->at(name) == t) << name;
}

} // namespace
} // namespace kiln::parallel
