// Tensor parallelism end to end below the trainer: the tiny Qwen's training
// step built as T ranks' shards (Megatron's split, collectives between the
// layers), compiled and run by the executor's lockstep group, gives the loss
// and — its pieces joined — every gradient of the unsplit model as the
// reference interpreter computes it, with and without sequence parallelism.
#include <gtest/gtest.h>

#include "compiler/autodiff/training_step.h"
#include "compiler/codegen/kernel_compiler.h"
#include "compiler/frontend/decoder_init.h"
#include "compiler/frontend/model_loader.h"
#include "ops/interpreter.h"
#include "ops/op_builder.h"
#include "runtime/executor.h"
#include "target/target.h"
#include "tests/support/codegen_test_util.h"
#include "tests/support/random.h"

namespace kiln {
namespace {

const std::string kTinyConfig = std::string(KILN_SOURCE_DIR) + "/examples/qwen-tiny/config.json";
constexpr int64_t kBatch = 2, kSeq = 8;

struct Step {
  Graph graph;                              // forward and backward, gradients out
  std::map<std::string, TensorSplit> split; // per parameter
};

Step buildStep(int tp, bool sequence_parallel = false) {
  frontend::ModelOptions options;
  options.batch = kBatch;
  options.seq = kSeq;
  options.tensor_parallel = tp;
  options.sequence_parallel = sequence_parallel;
  auto model = frontend::loadModel(kTinyConfig, options);
  EXPECT_TRUE(model) << model.message();
  autodiff::TrainingStepOptions step;
  step.optimizer = false;
  step.output_gradients = true;
  auto graph = autodiff::buildTrainingStep(model->graph, step);
  EXPECT_TRUE(graph) << graph.message();
  return {std::move(*graph), model->splits};
}

int countOps(const Graph &g, const std::string &op) {
  int n = 0;
  for (NodeId i = 0; i < static_cast<NodeId>(g.numNodes()); ++i)
    n += g.node(i).op == op;
  return n;
}

// (ranks, sequence parallelism)
class TensorParallel : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(TensorParallel, ShardedStepGivesTheLossAndGradientsOfTheWholeModel) {
  const auto [tp, sp] = GetParam();
  frontend::ModelOptions probe;
  auto config = *frontend::loadModel(kTinyConfig, probe)->config;
  ops::TensorMap feed;
  for (auto &[name, t] : frontend::initDecoderWeights(config, 11))
    feed[name] = t;
  feed["input_ids"] =
      testing::randomIndices(TensorType{DType::I64, {kBatch, kSeq}}, 5, config.vocab_size);
  feed["labels"] = feed["input_ids"];

  Step whole = buildStep(1);
  auto want = ops::interpret(whole.graph, feed);
  ASSERT_TRUE(want) << want.message();

  Step shard = buildStep(tp, sp);
  const int64_t layers = config.num_hidden_layers;
  if (!sp) {
    // Two f (before c_attn, before w1/w2) and two g (after each c_proj) per
    // layer forward, an f before lm_head, a g after the embedding and two in
    // the loss (the sum of exponentials, the parts of the loss); the backward
    // adds a g for every f. The loss's row max is the one max over the ranks.
    EXPECT_EQ(countOps(shard.graph, "TensorParallelCopy"), 2 * layers + 1);
    EXPECT_EQ(countOps(shard.graph, "TensorParallelReduce"), 4 * layers + 4);
  } else {
    // Every f on the residual stream an all-gather, every g a
    // reduce-scatter, each the other's backward; an f on each norm's
    // weight (two a layer and the final one), whose backward sums its
    // gradient; the loss's two g as without.
    EXPECT_EQ(countOps(shard.graph, "TensorParallelAllGather"), 4 * layers + 2);
    EXPECT_EQ(countOps(shard.graph, "TensorParallelReduceScatter"), 4 * layers + 2);
    EXPECT_EQ(countOps(shard.graph, "TensorParallelCopy"), 2 * layers + 1);
    EXPECT_EQ(countOps(shard.graph, "TensorParallelReduce"), 2 * layers + 3);
  }
  EXPECT_EQ(countOps(shard.graph, "TensorParallelMax"), 1);
  auto target = target::loadTarget("ascend910b");
  ASSERT_TRUE(target) << target.message();
  auto kernels = codegen::compileKernels(shard.graph, *target, {});
  ASSERT_TRUE(kernels) << kernels.message();
  EXPECT_TRUE(kernels->fallbacks.empty()) << "collectives are not fallbacks";
  auto executor = runtime::Executor::create(shard.graph, std::move(*kernels));
  ASSERT_TRUE(executor) << executor.message();

  std::vector<ops::TensorMap> inputs(tp);
  std::vector<const ops::TensorMap *> group;
  for (int r = 0; r < tp; ++r) {
    for (const auto &[name, t] : feed) {
      auto split = shard.split.find(name);
      inputs[r][name] = split == shard.split.end() ? t : takeShard(t, split->second, r, tp);
    }
    inputs[r][frontend::kTensorParallelRankName] = Tensor::fromInts(DType::I64, {}, {r});
    group.push_back(&inputs[r]);
  }
  auto got = (*executor)->runGroup(group, {});
  ASSERT_TRUE(got) << got.message();
  ASSERT_EQ(got->size(), static_cast<size_t>(tp));

  const Tensor &loss = want->at("loss");
  for (int r = 0; r < tp; ++r)
    EXPECT_EQ(testing::compareTensors((*got)[r].at("loss"), loss, 1e-5, 1e-6), "") << "rank " << r;
  for (const auto &[name, split] : shard.split) {
    const std::string grad = autodiff::gradientName(name);
    std::vector<Tensor> pieces;
    for (int r = 0; r < tp; ++r)
      pieces.push_back((*got)[r].at(grad));
    if (split.replicated()) {
      for (int r = 1; r < tp; ++r)
        EXPECT_EQ(testing::compareTensors(pieces[r], pieces[0], 0, 0), "")
            << grad << ": rank " << r << " differs from rank 0";
    }
    EXPECT_EQ(testing::compareTensors(joinShards(pieces, split), want->at(grad), 1e-4, 1e-6), "")
        << grad << " (" << split.toString() << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, TensorParallel,
                         ::testing::Combine(::testing::Values(2, 4), ::testing::Bool()));

// Sequence parallelism's collectives on two ranks, along the middle axis of
// [2, 4, 3] pieces: the all-gather joins them in rank order, the
// reduce-scatter gives each rank its half of the sum; a group of one
// passes its input through.
TEST(TensorParallelOps, AllGatherAndReduceScatterSplitTheMiddleAxis) {
  Graph g("g");
  ValueId x = g.addInput("x", {DType::F32, {2, 4, 3}}, InputRole::Data);
  ops::OpBuilder b(g);
  const AttrMap along = {{"ranks", int64_t{2}}, {"axis", int64_t{1}}};
  ValueId whole = b.create("TensorParallelAllGather", "gather", {x}, along);
  ValueId mine = b.create("TensorParallelReduceScatter", "scatter", {x}, along);
  ASSERT_TRUE(b.status()) << b.status().message();
  EXPECT_EQ(g.type(whole).shape, (Shape{2, 8, 3}));
  EXPECT_EQ(g.type(mine).shape, (Shape{2, 2, 3}));
  g.addOutput("whole", whole);
  g.addOutput("mine", mine);
  auto target = target::loadTarget("ascend910b");
  auto kernels = codegen::compileKernels(g, *target, {});
  ASSERT_TRUE(kernels) << kernels.message();
  auto executor = runtime::Executor::create(g, std::move(*kernels));
  ASSERT_TRUE(executor) << executor.message();
  ops::TensorMap in[2] = {{{"x", testing::randomTensor({DType::F32, {2, 4, 3}}, 1, -1, 1)}},
                          {{"x", testing::randomTensor({DType::F32, {2, 4, 3}}, 2, -1, 1)}}};
  auto got = (*executor)->runGroup({&in[0], &in[1]}, {});
  ASSERT_TRUE(got) << got.message();
  auto at = [](int64_t o, int64_t i, int64_t c, int64_t rows) { return (o * rows + i) * 3 + c; };
  for (int r = 0; r < 2; ++r)
    for (int64_t o = 0; o < 2; ++o)
      for (int64_t i = 0; i < 8; ++i)
        for (int64_t c = 0; c < 3; ++c) {
          // Rows [4k, 4k + 4) of the gathered axis are rank k's x.
          EXPECT_EQ((*got)[r].at("whole").getFloat(at(o, i, c, 8)),
                    in[i / 4]["x"].getFloat(at(o, i % 4, c, 4)));
          if (i >= 2)
            continue;
          const int64_t row = r * 2 + i; // rank r keeps rows [2r, 2r + 2) of the sum
          EXPECT_EQ((*got)[r].at("mine").getFloat(at(o, i, c, 2)),
                    in[0]["x"].getFloat(at(o, row, c, 4)) + in[1]["x"].getFloat(at(o, row, c, 4)));
        }

  Graph bad("bad");
  ValueId odd = bad.addInput("x", {DType::F32, {2, 3}}, InputRole::Data);
  ops::OpBuilder bb(bad);
  bb.create("TensorParallelReduceScatter", "scatter", {odd}, along);
  ASSERT_FALSE(bb.status());
  EXPECT_NE(bb.status().message().find("does not split into 2 equal pieces"), std::string::npos)
      << bb.status().message();
}

TEST(TensorParallelOps, OneDeviceRunsAGroupOfOneAndRefusesMore) {
  Graph g("g");
  ValueId x = g.addInput("x", {DType::F32, {2, 3}}, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId y = b.create("TensorParallelCopy", "f", {x}, {{"ranks", int64_t{2}}});
  ValueId z = b.create("TensorParallelReduce", "g", {y}, {{"ranks", int64_t{2}}});
  ASSERT_TRUE(b.status()) << b.status().message();
  g.addOutput("z", z);
  ops::TensorMap feed{{"x", testing::randomTensor({DType::F32, {2, 3}}, 1, -1, 1)}};
  auto one = ops::interpret(g, feed);
  ASSERT_FALSE(one);
  EXPECT_NE(one.message().find("needs every rank's input"), std::string::npos) << one.message();

  // Two ranks: the reduce adds them in rank order.
  auto target = target::loadTarget("ascend910b");
  auto kernels = codegen::compileKernels(g, *target, {});
  ASSERT_TRUE(kernels) << kernels.message();
  auto executor = runtime::Executor::create(g, std::move(*kernels));
  ASSERT_TRUE(executor) << executor.message();
  ops::TensorMap other{{"x", testing::randomTensor({DType::F32, {2, 3}}, 2, -1, 1)}};
  auto got = (*executor)->runGroup({&feed, &other}, {});
  ASSERT_TRUE(got) << got.message();
  for (int64_t i = 0; i < 6; ++i)
    for (int r = 0; r < 2; ++r)
      EXPECT_EQ((*got)[r].at("z").getFloat(i), feed["x"].getFloat(i) + other["x"].getFloat(i));
  auto lonely = (*executor)->run(feed);
  ASSERT_FALSE(lonely);
  EXPECT_NE(lonely.message().find("reduces over 2 tensor-parallel ranks, the run has 1"),
            std::string::npos)
      << lonely.message();
}

} // namespace
} // namespace kiln
