// The training-step graph: autodiff through a whole tiny Qwen against finite
// differences, and the AdamW update against the formula.
#include <cmath>

#include <gtest/gtest.h>

#include "compiler/autodiff/training_step.h"
#include "compiler/frontend/decoder_init.h"
#include "compiler/frontend/model_loader.h"
#include "ops/interpreter.h"
#include "tests/support/random.h"

namespace kiln::autodiff {
namespace {

const std::string kTinyConfig = std::string(KILN_SOURCE_DIR) + "/examples/qwen-tiny/config.json";

struct TinyQwen {
  Graph forward;
  frontend::DecoderConfig config;
  ops::TensorMap feed; // weights, input_ids and labels
};

TinyQwen makeTinyQwen(int64_t batch, int64_t seq) {
  frontend::ModelOptions options;
  options.batch = batch;
  options.seq = seq;
  auto model = frontend::loadModel(kTinyConfig, options);
  EXPECT_TRUE(model) << model.message();
  TinyQwen tiny{std::move(model->graph), *model->config, {}};
  for (auto &[name, t] : frontend::initDecoderWeights(tiny.config, 7))
    tiny.feed[name] = t;
  tiny.feed["input_ids"] =
      kiln::testing::randomIndices(TensorType{DType::I64, {batch, seq}}, 3, tiny.config.vocab_size);
  tiny.feed["labels"] = tiny.feed["input_ids"];
  return tiny;
}

double lossOf(const Graph &graph, const ops::TensorMap &feed) {
  auto out = ops::interpret(graph, feed);
  EXPECT_TRUE(out) << out.message();
  return out->at("loss").getFloat(0);
}

// Every parameter's gradient agrees with central differences of the loss at a
// few probed elements; the init is scaled up so the loss is not flat.
TEST(TrainingStep, GradientsOfTinyQwenMatchFiniteDifferences) {
  TinyQwen tiny = makeTinyQwen(1, 6);
  for (auto &[name, t] : tiny.feed)
    if (tiny.forward.findInput(name)->role == InputRole::Parameter && name.find("ln_") == name.npos)
      for (int64_t i = 0; i < t.numElements(); ++i)
        t.setFloat(i, t.getFloat(i) * 20.0f, OverflowMode::InfNan);

  TrainingStepOptions options;
  options.optimizer = false;
  options.output_gradients = true;
  auto train = buildTrainingStep(tiny.forward, options);
  ASSERT_TRUE(train) << train.message();
  auto out = ops::interpret(*train, tiny.feed);
  ASSERT_TRUE(out) << out.message();

  const double eps = 1e-2;
  int checked = 0;
  for (const GraphInput &in : tiny.forward.inputs()) {
    if (in.role != InputRole::Parameter)
      continue;
    const Tensor &grad = out->at(gradientName(in.name));
    ASSERT_EQ(grad.shape(), tiny.forward.type(in.value).shape) << in.name;
    for (int64_t k = 0; k < 3; ++k) {
      int64_t j = (k * 7919 + 13) % grad.numElements();
      // The embedding only receives gradient in rows of tokens that occur.
      if (in.name == "transformer.wte.weight") {
        int64_t hidden = tiny.config.hidden_size;
        j = tiny.feed["input_ids"].getInt(k % 6) * hidden + k;
      }
      ops::TensorMap plus = tiny.feed, minus = tiny.feed;
      float x = tiny.feed[in.name].getFloat(j);
      plus[in.name].setFloat(j, x + static_cast<float>(eps), OverflowMode::InfNan);
      minus[in.name].setFloat(j, x - static_cast<float>(eps), OverflowMode::InfNan);
      double numeric = (lossOf(tiny.forward, plus) - lossOf(tiny.forward, minus)) / (2 * eps);
      double exact = grad.getFloat(j);
      EXPECT_NEAR(exact, numeric, 2e-3 + 3e-2 * std::abs(numeric)) << in.name << " element " << j;
      ++checked;
    }
  }
  EXPECT_GT(checked, 20);
}

// The step's outputs are the AdamW update computed from its own gradients.
TEST(TrainingStep, AdamWUpdateFollowsTheFormula) {
  TinyQwen tiny = makeTinyQwen(2, 8);
  TrainingStepOptions options;
  options.output_gradients = true;
  options.weight_decay = 0.1;
  auto train = buildTrainingStep(tiny.forward, options);
  ASSERT_TRUE(train) << train.message();
  ops::TensorMap feed = tiny.feed;
  feed[kAdamStepName] = Tensor::scalar(DType::I64, 4);
  feed[kLearningRateName] = Tensor::scalar(DType::F32, 1e-3);
  for (const GraphInput &in : train->inputs())
    if (in.role == InputRole::OptimizerState && in.name != kAdamStepName)
      feed[in.name] = kiln::testing::randomTensor(train->type(in.value), 11, 0.0f, 0.01f);
  auto out = ops::interpret(*train, feed);
  ASSERT_TRUE(out) << out.message();
  EXPECT_EQ(out->at(kAdamStepName).getInt(0), 5);

  const std::string name = "transformer.h.1.mlp.w2.weight";
  const Tensor &p = feed[name], &g = out->at(gradientName(name));
  const Tensor &m = feed[adamMomentName(name)], &v = feed[adamVelocityName(name)];
  const double t = 5, lr = 1e-3, b1 = 0.9, b2 = 0.95;
  for (int64_t i = 0; i < p.numElements(); i += 97) {
    double gi = g.getFloat(i);
    double mi = b1 * m.getFloat(i) + (1 - b1) * gi;
    double vi = b2 * v.getFloat(i) + (1 - b2) * gi * gi;
    double pi = p.getFloat(i) * (1 - lr * 0.1);
    pi -= lr * (mi / (1 - std::pow(b1, t))) / (std::sqrt(vi / (1 - std::pow(b2, t))) + 1e-6);
    EXPECT_NEAR(out->at(name).getFloat(i), pi, 1e-6);
    EXPECT_NEAR(out->at(adamMomentName(name)).getFloat(i), mi, 1e-7);
    EXPECT_NEAR(out->at(adamVelocityName(name)).getFloat(i), vi, 1e-9);
  }

  double norm = 0;
  for (const GraphInput &in : tiny.forward.inputs())
    if (in.role == InputRole::Parameter)
      for (float x : out->at(gradientName(in.name)).toFloats())
        norm += static_cast<double>(x) * x;
  EXPECT_NEAR(out->at("grad_norm").getFloat(0), std::sqrt(norm), 1e-4 * std::sqrt(norm));
}

TEST(TrainingStep, LossDecreasesOverSteps) {
  TinyQwen tiny = makeTinyQwen(2, 8);
  auto train = buildTrainingStep(tiny.forward, TrainingStepOptions{});
  ASSERT_TRUE(train) << train.message();
  ops::TensorMap state = tiny.feed;
  state[kAdamStepName] = Tensor::scalar(DType::I64, 0);
  state[kLearningRateName] = Tensor::scalar(DType::F32, 3e-3);
  for (const GraphInput &in : train->inputs())
    if (in.role == InputRole::OptimizerState && in.name != kAdamStepName)
      state[in.name] = Tensor(train->type(in.value));
  std::vector<double> losses;
  for (int step = 0; step < 8; ++step) {
    auto out = ops::interpret(*train, state);
    ASSERT_TRUE(out) << out.message();
    losses.push_back(out->at("loss").getFloat(0));
    for (auto &[name, t] : *out)
      if (state.count(name))
        state[name] = t;
  }
  EXPECT_LT(losses.back(), losses.front() - 0.1)
      << "first " << losses.front() << " last " << losses.back();
}

TEST(TrainingStep, NeedsALossOutput) {
  Graph g("no_loss");
  g.addInput("x", TensorType{DType::F32, {2}}, InputRole::Parameter);
  auto train = buildTrainingStep(g, TrainingStepOptions{});
  ASSERT_FALSE(train);
  EXPECT_NE(train.message().find("no output named 'loss'"), std::string::npos);
}

} // namespace
} // namespace kiln::autodiff
