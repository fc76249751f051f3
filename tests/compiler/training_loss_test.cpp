// Training on a named output (an imported model's loss): the step keeps
// every output and differentiates the one named, and a name that is not a
// scalar float output is refused with the outputs listed (E12030 for an
// ONNX model).
#include <gtest/gtest.h>

#include "compiler/autodiff/training_step.h"
#include "compiler/driver/training_loss.h"
#include "ops/interpreter.h"
#include "ops/op_builder.h"
#include "tests/support/op_test_util.h"

namespace kiln::testing {
namespace {

// x [3] (a parameter); outputs "squares" = x * x and "total" = sum(x * x).
Graph squares() {
  Graph g("squares");
  ValueId x = g.addInput("x", TensorType{DType::F32, {3}}, InputRole::Parameter);
  ops::OpBuilder b(g);
  ValueId sq = b.create("Mul", "square", {x, x});
  g.addOutput("squares", sq);
  g.addOutput("total", b.create("ReduceSum", "sum", {sq}));
  EXPECT_TRUE(b.status().isOk()) << b.status().message();
  return g;
}

TEST(TrainingLoss, TheNamedOutputIsDifferentiatedAndEveryOutputKept) {
  autodiff::TrainingStepOptions options;
  options.optimizer = false;
  options.output_gradients = true;
  options.grad_norm = false;
  options.keep_outputs = true;
  options.loss = "total";
  auto train = autodiff::buildTrainingStep(squares(), options);
  ASSERT_TRUE(train) << train.message();
  std::vector<std::string> names;
  for (const GraphOutput &out : train->outputs())
    names.push_back(out.name);
  EXPECT_EQ(names, (std::vector<std::string>{"squares", "total", "grad.x"}));
  const Tensor x = Tensor::fromFloats(DType::F32, {3}, {1.0f, -2.0f, 0.5f});
  auto out = ops::interpret(*train, {{"x", x}});
  ASSERT_TRUE(out) << out.message();
  for (int64_t i = 0; i < 3; ++i) // d/dx sum(x^2) = 2x
    EXPECT_FLOAT_EQ(out->at("grad.x").getFloat(i), 2 * x.getFloat(i));
}

TEST(TrainingLoss, ANameThatIsNoScalarFloatOutputListsTheOutputs) {
  const Graph g = squares();
  auto vector = autodiff::lossOutput(g, "squares");
  ASSERT_FALSE(vector);
  EXPECT_TRUE(mentions(vector.message(), {"'squares'", "f32[3]", "scalar float",
                                          "its outputs: squares f32[3], total f32[]"}));
  auto missing = autodiff::lossOutput(g, "nope");
  ASSERT_FALSE(missing);
  EXPECT_TRUE(mentions(missing.message(), {"no output named 'nope'", "squares f32[3]"}));

  frontend::LoadedModel onnx{g, {}, {}, {}, true};
  auto coded = driver::trainingLoss(onnx, "m.onnx", "squares");
  ASSERT_FALSE(coded);
  EXPECT_EQ(coded.error().code(), "E12030");
  EXPECT_TRUE(mentions(coded.message(), {"m.onnx: --loss 'squares'"}));
  auto none = driver::trainingLoss(onnx, "m.onnx", "");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code(), "E12030");
  EXPECT_TRUE(mentions(none.message(), {"needs --loss NAME", "its outputs: squares, total"}));
  auto named = driver::trainingLoss(onnx, "m.onnx", "total");
  ASSERT_TRUE(named) << named.message();
  EXPECT_EQ(*named, "total");

  frontend::LoadedModel graph_json{g, {}, {}, {}, false};
  EXPECT_EQ(*driver::trainingLoss(graph_json, "g.json", ""), "loss");
  EXPECT_FALSE(driver::trainingLoss(graph_json, "g.json", "total"));
}

} // namespace
} // namespace kiln::testing
