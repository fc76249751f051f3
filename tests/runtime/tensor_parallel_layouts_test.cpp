// Tensor parallelism over layouts the ranks do not split evenly, below the
// trainer: a grouped-query model with fewer key/value heads than ranks
// (each head replicated over the ranks that use it, its gradient summed
// over them) and a vocabulary the ranks do not divide (padded, the padding
// left out of the loss). The sharded step, compiled and run by the
// executor's lockstep group, gives the loss and — its pieces joined —
// every gradient of the unsplit model as the reference interpreter
// computes it; the replicated copies hold the same gradient and the
// padding none.
#include <fstream>
#include <optional>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/autodiff/training_step.h"
#include "compiler/codegen/kernel_compiler.h"
#include "compiler/frontend/decoder_init.h"
#include "compiler/frontend/model_loader.h"
#include "ops/interpreter.h"
#include "runtime/executor.h"
#include "target/target.h"
#include "tests/support/codegen_test_util.h"
#include "tests/support/random.h"

namespace kiln {
namespace {

constexpr int64_t kBatch = 2, kSeq = 8;

struct Layout {
  std::string name;
  int hidden, heads, kv_heads, intermediate;
  int64_t vocab;
  int tp;
};

// The tiny Qwen2 with `layout`'s widths, heads and vocabulary, written where
// the test can load it.
std::string writeConfig(const Layout &layout) {
  std::ifstream in(std::string(KILN_SOURCE_DIR) + "/examples/qwen2-tiny/config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config["hidden_size"] = layout.hidden;
  config["intermediate_size"] = layout.intermediate;
  config["num_attention_heads"] = layout.heads;
  config["num_key_value_heads"] = layout.kv_heads;
  config["vocab_size"] = layout.vocab;
  const std::string path = ::testing::TempDir() + "/" + layout.name + ".json";
  std::ofstream(path) << config.dump();
  return path;
}

struct Step {
  Graph graph;
  std::map<std::string, TensorSplit> split;
  std::optional<frontend::DecoderConfig> config;
};

Step buildStep(const std::string &config, int tp, const frontend::LoraConfig &lora = {}) {
  frontend::ModelOptions options;
  options.lora = lora;
  options.batch = kBatch;
  options.seq = kSeq;
  options.tensor_parallel = tp;
  auto model = frontend::loadModel(config, options);
  EXPECT_TRUE(model) << model.message();
  autodiff::TrainingStepOptions step;
  step.optimizer = false;
  step.output_gradients = true;
  auto graph = autodiff::buildTrainingStep(model->graph, step);
  EXPECT_TRUE(graph) << graph.message();
  return {std::move(*graph), model->splits, model->config};
}

// `layout`'s sharded step against the whole one; with `lora`, its adapters
// random (B too, so that every factor has a gradient).
void expectShardedStepMatches(const Layout &layout, const frontend::LoraConfig &lora = {}) {
  const std::string path = writeConfig(layout);
  Step whole = buildStep(path, 1, lora);
  ASSERT_TRUE(whole.config);
  ops::TensorMap feed;
  for (auto &[name, t] : frontend::initDecoderWeights(*whole.config, 11))
    feed[name] = t;
  if (lora.enabled()) {
    auto adapters = frontend::loraParameters(*whole.config, lora);
    ASSERT_TRUE(adapters) << adapters.message();
    uint64_t seed = 40;
    for (const frontend::ParamSpec &p : *adapters)
      feed[p.name] = testing::randomTensor({DType::F32, p.shape}, ++seed, -0.1, 0.1);
  }
  // Labels that reach the last real word of the vocabulary too.
  feed["input_ids"] =
      testing::randomIndices(TensorType{DType::I64, {kBatch, kSeq}}, 5, layout.vocab);
  feed["input_ids"].setInt(kSeq - 1, layout.vocab - 1);
  feed["labels"] = feed["input_ids"];
  auto want = ops::interpret(whole.graph, feed);
  ASSERT_TRUE(want) << want.message();

  const int tp = layout.tp;
  Step shard = buildStep(path, tp, lora);
  auto target = target::loadTarget("ascend910b");
  ASSERT_TRUE(target) << target.message();
  auto kernels = codegen::compileKernels(shard.graph, *target, {});
  ASSERT_TRUE(kernels) << kernels.message();
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

  for (int r = 0; r < tp; ++r)
    EXPECT_EQ(testing::compareTensors((*got)[r].at("loss"), want->at("loss"), 1e-5, 1e-6), "")
        << "rank " << r;
  int replicated_heads = 0, padded = 0;
  for (const auto &[name, split] : shard.split) {
    const std::string grad = autodiff::gradientName(name);
    if (!(*got)[0].count(grad))
      continue; // frozen under LoRA
    std::vector<Tensor> pieces;
    for (int r = 0; r < tp; ++r)
      pieces.push_back((*got)[r].at(grad));
    // Every copy of a piece (a replicated key/value head) holds the same
    // summed gradient.
    const int copies = split.copies(tp);
    replicated_heads += !split.replicated() && copies > 1;
    for (int r = 0; r < tp; ++r)
      EXPECT_EQ(testing::compareTensors(pieces[r], pieces[r - r % copies], 0, 0), "")
          << grad << ": rank " << r << " differs from its piece's first copy";
    // The padding rows of the vocabulary get no gradient.
    if (split.pad_length > 0 && paddedLength(split.pad_length, tp) != split.pad_length) {
      ++padded;
      const Tensor &last = pieces.back();
      const int64_t rows = last.shape()[0], cols = last.shape()[1];
      const int64_t real = split.pad_length - (tp - 1) * rows;
      for (int64_t i = std::max<int64_t>(real, 0) * cols; i < rows * cols; ++i)
        ASSERT_EQ(last.getFloat(i), 0.0f) << grad << " padding element " << i;
    }
    EXPECT_EQ(testing::compareTensors(joinShards(pieces, split), want->at(grad), 1e-4, 1e-6), "")
        << grad << " (" << split.toString() << ")";
  }
  const bool fewer_heads = layout.kv_heads < tp;
  // k_proj and v_proj's weight and bias in 2 layers, or under LoRA their B.
  EXPECT_EQ(replicated_heads, fewer_heads ? (lora.enabled() ? 2 * 2 : 2 * 2 * 2) : 0);
  EXPECT_EQ(padded, layout.vocab % tp != 0 ? 2 : 0) << "the embedding and lm_head";
}

class UnevenTensorParallel : public ::testing::TestWithParam<Layout> {};

TEST_P(UnevenTensorParallel, ShardedStepGivesTheLossAndGradientsOfTheWholeModel) {
  expectShardedStepMatches(GetParam());
}

// LoRA on the replicated projections: each rank's B of k_proj and v_proj is
// its head's, its gradient summed over the ranks sharing the head.
TEST(UnevenTensorParallel, LoraOnReplicatedKeyValueHeads) {
  frontend::LoraConfig lora;
  lora.rank = 2;
  lora.targets = {"q_proj", "k_proj", "v_proj", "o_proj"};
  expectShardedStepMatches({"kv2_of_8_tp4_lora", 64, 8, 2, 128, 512, 4}, lora);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, UnevenTensorParallel,
    ::testing::Values(Layout{"kv2_of_8_tp4", 64, 8, 2, 128, 512, 4},
                      Layout{"kv1_tp2_vocab511", 64, 4, 1, 128, 511, 2},
                      Layout{"kv1_tp4_vocab511", 64, 4, 1, 128, 511, 4},
                      Layout{"vocab1000_tp3", 48, 6, 3, 96, 1000, 3},
                      // 384 rows of 128 a rank: the last rank's are all padding.
                      Layout{"vocab200_tp3", 48, 6, 3, 96, 200, 3}),
    [](const auto &info) { return info.param.name; });

// Key/value heads that neither divide over the ranks nor divide them: 2
// heads over 3 ranks, 3 heads over 2.
TEST(UnevenTensorParallel, KeyValueHeadsTheRanksCannotShareAreAnError) {
  frontend::ModelOptions options;
  options.tensor_parallel = 3;
  auto bad = frontend::loadModel(writeConfig({"kv2_tp3", 48, 6, 2, 96, 512, 3}), options);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("the ranks must be a multiple of them"), std::string::npos)
      << bad.message();
  options.tensor_parallel = 2;
  auto odd = frontend::loadModel(writeConfig({"kv3_tp2", 48, 6, 3, 96, 512, 2}), options);
  ASSERT_FALSE(odd);
  EXPECT_NE(odd.message().find("must divide num_key_value_heads (3)"), std::string::npos)
      << odd.message();
}

} // namespace
} // namespace kiln
