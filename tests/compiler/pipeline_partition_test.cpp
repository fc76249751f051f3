// The pipeline's cut of the training step: run stage by stage on the
// reference interpreter (every forward in order, then every backward in
// reverse, each fed the others' outputs by name), the stages give the bits
// of the whole step, with and without recomputation; each stage reads only
// its own weights, and hands each neighbour one tensor per boundary.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/autodiff/training_step.h"
#include "compiler/frontend/decoder_init.h"
#include "compiler/frontend/model_loader.h"
#include "compiler/parallel/pipeline_partition.h"
#include "compiler/parallel/pipeline_schedule.h"
#include "ops/interpreter.h"
#include "passes/memory/recompute_pass.h"
#include "tests/support/random.h"

namespace kiln::parallel {
namespace {

namespace fs = std::filesystem;

// The tiny Qwen with `layers` layers, as the trainer's step: gradients out,
// loss scale in, no optimizer.
struct Step {
  Graph graph;
  ops::TensorMap feed;
};

Step tinyStep(int layers, bool tied = false) {
  nlohmann::json config = nlohmann::json::parse(
      std::ifstream(std::string(KILN_SOURCE_DIR) + "/examples/qwen-tiny/config.json"));
  config["num_hidden_layers"] = layers;
  config["tie_word_embeddings"] = tied;
  const fs::path path = fs::temp_directory_path() /
                        ("kiln-pp-" + std::to_string(layers) + (tied ? "t" : "") + ".json");
  std::ofstream(path) << config.dump();
  frontend::ModelOptions options;
  options.batch = 2;
  options.seq = 8;
  auto model = frontend::loadModel(path.string(), options);
  EXPECT_TRUE(model) << model.message();
  autodiff::TrainingStepOptions train;
  train.optimizer = false;
  train.output_gradients = true;
  train.loss_scale_input = true;
  train.grad_norm = false;
  auto graph = autodiff::buildTrainingStep(model->graph, train);
  EXPECT_TRUE(graph) << graph.message();
  Step step{std::move(*graph), {}};
  auto weights = frontend::initDecoderWeights(*model->config, 7);
  for (const GraphInput &in : step.graph.inputs()) {
    const TensorType &type = step.graph.type(in.value);
    if (isWeight(in.role))
      step.feed[in.name] = weights.at(in.name);
    else if (in.name == "input_ids" || in.name == "labels")
      step.feed[in.name] = testing::randomIndices(type, 5, model->config->vocab_size);
    else
      step.feed[in.name] = Tensor::scalar(DType::F32, 1024.0);
  }
  return step;
}

const TensorType &in_type(const Graph &g, const GraphInput &in) { return g.type(in.value); }

ops::TensorMap interpretOk(const Graph &g, const ops::TensorMap &feed) {
  auto out = ops::interpret(g, feed);
  EXPECT_TRUE(out) << g.name() << ": " << out.message();
  return out ? *out : ops::TensorMap{};
}

// Every forward in stage order, then every backward in reverse; what each
// gives is fed to the rest by name. Returns the step's outputs.
ops::TensorMap runStages(const PipelinePartition &p, const ops::TensorMap &feed) {
  ops::TensorMap values = feed, outputs;
  auto run = [&](const Graph &g) {
    for (auto &[name, t] : interpretOk(g, values)) {
      (name.starts_with("pp.") ? values : outputs)[name] = t;
    }
  };
  for (int s = 0; s < p.stages; ++s)
    run(p.forward[s]);
  for (int s = p.stages; s-- > 0;)
    run(p.backward[s]);
  return outputs;
}

void expectSameBits(const ops::TensorMap &want, const ops::TensorMap &got,
                    const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto &[name, w] : want) {
    ASSERT_TRUE(got.count(name)) << what << ": no " << name;
    EXPECT_TRUE(got.at(name) == w) << what << ": " << name;
  }
}

TEST(PipelinePartition, StagesComputeTheWholeStepsBits) {
  Step step = tinyStep(4);
  const ops::TensorMap whole = interpretOk(step.graph, step.feed);
  for (int stages : {2, 4}) {
    auto p = partitionPipeline(step.graph, stages);
    ASSERT_TRUE(p) << p.message();
    expectSameBits(whole, runStages(*p, step.feed), "pp " + std::to_string(stages));
    // Each stage reads its own layers' weights only; the embedding is the
    // first stage's, the final norm and lm_head the last's.
    for (int s = 0; s < stages; ++s)
      for (const Graph *g : {&p->forward[s], &p->backward[s]})
        for (const GraphInput &in : g->inputs()) {
          if (!isWeight(in.role))
            continue;
          EXPECT_EQ(weightStage(in.name, p->layer_stage, stages), s) << g->name() << " " << in.name;
        }
    EXPECT_NE(p->forward[0].findInput("transformer.wte.weight"), nullptr);
    EXPECT_NE(p->forward[stages - 1].findInput("lm_head.weight"), nullptr);
    EXPECT_NE(p->forward[stages - 1].findOutput("loss"), nullptr);
    // Down the pipeline one activation per boundary, up it one gradient.
    for (int s = 0; s + 1 < stages; ++s) {
      int down = 0, up = 0;
      for (const StageTransfer &t : p->transfers) {
        const bool to_next =
            std::find(t.to.begin(), t.to.end(), StageProgram{s + 1, true}) != t.to.end();
        down += t.from == StageProgram{s, true} && to_next;
        up += t.from == StageProgram{s + 1, false} &&
              std::find(t.to.begin(), t.to.end(), StageProgram{s, false}) != t.to.end();
      }
      EXPECT_EQ(down, 1) << "stage " << s;
      EXPECT_EQ(up, 1) << "stage " << s;
    }
  }
}

TEST(PipelinePartition, RecomputedStagesKeepOnlyEachLayersInput) {
  Step step = tinyStep(4);
  const ops::TensorMap whole = interpretOk(step.graph, step.feed);
  auto stashes = [&](const Graph &g) {
    auto p = partitionPipeline(g, 2);
    EXPECT_TRUE(p) << p.message();
    int64_t bytes = 0;
    for (const StageTransfer &t : p->transfers)
      if (t.from == StageProgram{0, true})
        for (const GraphInput &in : p->backward[0].inputs())
          if (in.name == t.name)
            bytes += numElements(in_type(p->backward[0], in).shape) *
                     static_cast<int64_t>(dtypeSize(in_type(p->backward[0], in).dtype));
    return std::make_pair(std::move(*p), bytes);
  };
  Graph recomputed = step.graph;
  passes::recomputeActivations(recomputed, {passes::RecomputeMode::Full, {}});
  ASSERT_TRUE(recomputed.compact());
  auto [kept, kept_bytes] = stashes(step.graph);
  auto [again, again_bytes] = stashes(recomputed);
  expectSameBits(whole, runStages(again, step.feed), "recomputed");
  EXPECT_LT(again_bytes * 3, kept_bytes) << "the stash shrinks to the layers' inputs";
}

// Stages of given lengths (--pp-layers; the shorter first and last stages
// that make room for the embedding and lm_head): each layer's weights on
// its stage, the whole step's bits.
TEST(PipelinePartition, UnevenSplitsComputeTheWholeStepsBits) {
  Step step = tinyStep(4);
  const ops::TensorMap whole = interpretOk(step.graph, step.feed);
  for (const std::vector<int> &split :
       {std::vector<int>{0, 1, 1, 1}, std::vector<int>{0, 0, 0, 1}, std::vector<int>{0, 1, 1, 2}}) {
    const int stages = split.back() + 1;
    auto p = partitionPipeline(step.graph, stages, split);
    ASSERT_TRUE(p) << p.message();
    EXPECT_EQ(p->layer_stage, split);
    expectSameBits(whole, runStages(*p, step.feed), "uneven split");
    for (int s = 0; s < stages; ++s)
      for (const GraphInput &in : p->forward[s].inputs()) {
        if (isWeight(in.role)) {
          EXPECT_EQ(weightStage(in.name, split, stages), s) << in.name;
        }
      }
  }
  EXPECT_FALSE(partitionPipeline(step.graph, 2, {0, 1, 1}));
  EXPECT_FALSE(partitionPipeline(step.graph, 2, {0, 1, 2, 1}));
}

TEST(PipelinePartition, RefusesWhatItCannotCut) {
  auto few = partitionPipeline(tinyStep(2).graph, 4);
  ASSERT_FALSE(few);
  EXPECT_NE(few.message().find("2 transformer layers, fewer than the stages"), std::string::npos)
      << few.message();
}

// A tied embedding lives on the first stage; the last stage's head reads it
// as a transfer down the pipeline, and the head's gradient term goes back up
// to be summed with the embedding's on the first stage.
TEST(PipelinePartition, TiedEmbeddingsAreSentToTheHeadAndTheirGradientSummedOnTheFirstStage) {
  Step step = tinyStep(4, true);
  const ops::TensorMap whole = interpretOk(step.graph, step.feed);
  for (int stages : {2, 4}) {
    auto p = partitionPipeline(step.graph, stages);
    ASSERT_TRUE(p) << p.message();
    expectSameBits(whole, runStages(*p, step.feed), "tied pp " + std::to_string(stages));
    EXPECT_NE(p->forward[0].findInput("transformer.wte.weight"), nullptr);
    EXPECT_EQ(p->forward[stages - 1].findInput("transformer.wte.weight"), nullptr)
        << "received, not read as the last stage's own weight";
    EXPECT_NE(p->backward[0].findOutput("grad.transformer.wte.weight"), nullptr);
    int weight_sends = 0;
    for (const StageTransfer &t : p->transfers)
      weight_sends += t.name.find("transformer.wte.weight") != std::string::npos;
    EXPECT_EQ(weight_sends, 1) << "one transfer of the weight, read by the last stage";
  }
}

} // namespace
} // namespace kiln::parallel
