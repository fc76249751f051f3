// CrossEntropyLoss and CrossEntropyLossGrad: shape inference, the loss and its
// gradient against the direct formula (incl. ignore_index), label errors, and
// a finite-difference check of the gradient rule.
#include <cmath>

#include <gtest/gtest.h>

#include "ops/op_builder.h"
#include "tests/support/gradient_check.h"
#include "tests/support/op_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

// -log(exp(x[label]) / sum_j exp(x[j])) of one row, straight from the definition.
double rowLoss(const Tensor &logits, int64_t r, int64_t label) {
  const int64_t v = logits.shape()[1];
  double denom = 0;
  for (int64_t j = 0; j < v; ++j)
    denom += std::exp(static_cast<double>(logits.getFloat(r * v + j)));
  return -std::log(std::exp(static_cast<double>(logits.getFloat(r * v + label))) / denom);
}

TEST(CrossEntropyLossInfer, ScalarF32Loss) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    auto t = inferOp("CrossEntropyLoss", {{dt, {6, 11}}, {DType::I64, {6}}});
    ASSERT_TRUE(t) << t.message();
    EXPECT_EQ((*t)[0], (TensorType{DType::F32, {}}));
  }
}

TEST(CrossEntropyLossInfer, RejectsBadInputs) {
  EXPECT_TRUE(
      mentions(inferOp("CrossEntropyLoss", {{DType::F32, {2, 3, 4}}, {DType::I32, {2}}}).message(),
               {"2-D", "f32[2,3,4]"}));
  EXPECT_TRUE(
      mentions(inferOp("CrossEntropyLoss", {{DType::F32, {2, 3}}, {DType::I32, {3}}}).message(),
               {"labels", "i32[3]", "N = 2"}));
  EXPECT_TRUE(
      mentions(inferOp("CrossEntropyLoss", {{DType::F32, {2, 3}}, {DType::I32, {2, 1}}}).message(),
               {"labels", "1-D"}));
  EXPECT_FALSE(inferOp("CrossEntropyLoss", {{DType::F32, {2, 0}}, {DType::I32, {2}}}));
  EXPECT_FALSE(inferOp("CrossEntropyLoss", {{DType::F32, {2, 3}}, {DType::F32, {2}}}));
}

TEST(CrossEntropyLossGradInfer, LogitsTypeAndScalarDLoss) {
  auto t =
      inferOp("CrossEntropyLossGrad", {{DType::BF16, {4, 5}}, {DType::I32, {4}}, {DType::F32, {}}});
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ((*t)[0], (TensorType{DType::BF16, {4, 5}}));
  EXPECT_TRUE(mentions(
      inferOp("CrossEntropyLossGrad", {{DType::F32, {4, 5}}, {DType::I32, {4}}, {DType::F32, {1}}})
          .message(),
      {"dloss", "scalar"}));
  EXPECT_FALSE(
      inferOp("CrossEntropyLossGrad", {{DType::F32, {4, 5}}, {DType::I32, {5}}, {DType::F32, {}}}));
}

TEST(CrossEntropyLossKernel, MeanOverKeptRows) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    Tensor logits = randomTensor({dt, {5, 7}}, 1, -3.0f, 3.0f);
    Tensor labels = Tensor::fromInts(DType::I64, {5}, {3, -100, 0, 6, -100});
    auto loss = runOp("CrossEntropyLoss", {logits, labels});
    ASSERT_TRUE(loss) << loss.message();
    const double want = (rowLoss(logits, 0, 3) + rowLoss(logits, 2, 0) + rowLoss(logits, 3, 6)) / 3;
    EXPECT_NEAR((*loss)[0].getFloat(0), want, 1e-6 * want) << dtypeName(dt);
  }
}

TEST(CrossEntropyLossKernel, CustomIgnoreIndexAndLargeLogits) {
  // Logits near the f16 range stay finite because logsumexp shifts by the max.
  Tensor logits = Tensor::fromFloats(DType::F16, {2, 3}, {60000, 59968, 0, 1, 2, 3});
  Tensor labels = Tensor::fromInts(DType::I32, {2}, {1, 0});
  auto loss = runOp("CrossEntropyLoss", {logits, labels}, {{"ignore_index", int64_t{0}}});
  ASSERT_TRUE(loss) << loss.message();
  // Only row 0 is kept: log(1 + e^-32 + e^-60000) + 32.
  EXPECT_NEAR((*loss)[0].getFloat(0), 32.0 + std::log1p(std::exp(-32.0)), 1e-5);
}

TEST(CrossEntropyLossKernel, AllRowsIgnoredGivesZero) {
  auto loss = runOp("CrossEntropyLoss", {randomTensor({DType::F32, {3, 4}}, 2),
                                         Tensor::fromInts(DType::I32, {3}, {-100, -100, -100})});
  ASSERT_TRUE(loss) << loss.message();
  EXPECT_EQ((*loss)[0].getFloat(0), 0.0f);
  auto grad = runOp("CrossEntropyLossGrad", {randomTensor({DType::F32, {3, 4}}, 2),
                                             Tensor::fromInts(DType::I32, {3}, {-100, -100, -100}),
                                             Tensor::scalar(DType::F32, 1.0)});
  ASSERT_TRUE(grad) << grad.message();
  for (int64_t i = 0; i < 12; ++i)
    EXPECT_EQ((*grad)[0].getFloat(i), 0.0f);
}

TEST(CrossEntropyLossKernel, LabelOutOfRangeIsAnError) {
  for (const char *op : {"CrossEntropyLoss", "CrossEntropyLossGrad"}) {
    std::vector<Tensor> in{randomTensor({DType::F32, {3, 4}}, 3),
                           Tensor::fromInts(DType::I64, {3}, {1, 4, -100})};
    if (std::string(op) == "CrossEntropyLossGrad")
      in.push_back(Tensor::scalar(DType::F32, 1.0));
    auto r = runOp(op, in);
    ASSERT_FALSE(r) << op;
    EXPECT_TRUE(mentions(r.message(), {"'op'", "label 4", "row 1", "[0, 4)"}));
    in[1] = Tensor::fromInts(DType::I64, {3}, {1, -1, 2});
    EXPECT_TRUE(mentions(runOp(op, in).message(), {"label -1"}));
  }
}

// dlogits[r, j] = (softmax(row r)[j] - [j == label]) * dloss / count, 0 on ignored rows.
TEST(CrossEntropyLossGradKernel, MatchesFormula) {
  for (DType dt : {DType::F32, DType::BF16}) {
    Tensor logits = randomTensor({dt, {4, 5}}, 4, -2.0f, 2.0f);
    Tensor labels = Tensor::fromInts(DType::I32, {4}, {2, -100, 4, 0});
    const double dloss = 0.75;
    auto g = runOp("CrossEntropyLossGrad", {logits, labels, Tensor::scalar(DType::F32, dloss)});
    ASSERT_TRUE(g) << g.message();
    ASSERT_EQ((*g)[0].dtype(), dt);
    for (int64_t r = 0; r < 4; ++r) {
      double denom = 0;
      for (int64_t j = 0; j < 5; ++j)
        denom += std::exp(static_cast<double>(logits.getFloat(r * 5 + j)));
      for (int64_t j = 0; j < 5; ++j) {
        double want = 0;
        if (labels.getInt(r) != -100)
          want = (std::exp(static_cast<double>(logits.getFloat(r * 5 + j))) / denom -
                  (j == labels.getInt(r) ? 1.0 : 0.0)) *
                 dloss / 3;
        const float rounded = Tensor::scalar(dt, want).getFloat(0);
        EXPECT_NEAR((*g)[0].getFloat(r * 5 + j), rounded, 1e-6 + 1e-6 * std::abs(rounded))
            << dtypeName(dt) << " " << r << "," << j;
      }
    }
  }
}

TEST(CrossEntropyLossGrad, FiniteDifferenceInTheLogits) {
  struct Case {
    Shape logits;
    Tensor labels;
    int64_t ignore_index;
  };
  const Case cases[] = {
      {{4, 6}, Tensor::fromInts(DType::I64, {4}, {5, -100, 0, 2}), -100},
      {{3, 2}, Tensor::fromInts(DType::I32, {3}, {1, 1, 0}), -100},
      {{5, 3}, Tensor::fromInts(DType::I32, {5}, {2, 1, 2, 0, 1}), 2},
  };
  for (const Case &c : cases) {
    EXPECT_TRUE(checkOpGradient(
        "CrossEntropyLoss", {gradInput({DType::F32, c.logits}, -3.0f, 3.0f), fixedInput(c.labels)},
        {{"ignore_index", c.ignore_index}}))
        << shapeToString(c.logits);
  }
}

TEST(CrossEntropyLossGrad, LabelsGetNoGradient) {
  Graph g("g");
  ValueId logits = g.addInput("logits", {DType::F16, {3, 4}}, InputRole::Data);
  ValueId labels = g.addInput("labels", {DType::I32, {3}}, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId loss = b.create("CrossEntropyLoss", "loss", {logits, labels});
  ValueId dloss = g.addInput("dloss", g.type(loss), InputRole::Data);
  ops::GradContext ctx{b, g.node(g.value(loss).producer), {dloss}};
  auto grads = ops::OpRegistry::builtin().find("CrossEntropyLoss")->impl.grad(ctx);
  ASSERT_TRUE(grads) << grads.message();
  EXPECT_EQ(g.type((*grads)[0]), g.type(logits));
  EXPECT_EQ((*grads)[1], kNoValue);
}

} // namespace
} // namespace kiln::testing
