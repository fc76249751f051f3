// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss are differentiable
// (autodiff's gradient of the imported loss against central differences on
// the reference interpreter), and Einsum's matmul-shaped equations agree
// with a direct sum over their letters; other equations are E12011.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "compiler/autodiff/autodiff.h"
#include "compiler/driver/compile.h"
#include "compiler/driver/job.h"
#include "compiler/driver/kernels.h"
#include "compiler/frontend/onnx/onnx_errors.h"
#include "ir/tensor_compare.h"
#include "ops/index_inputs.h"
#include "runtime/executor.h"
#include "tests/compiler/onnx/onnx_test_model.h"
#include "tests/support/random.h"

namespace kiln::frontend::onnx_import {
namespace {

using testing::OnnxTestModel;
constexpr int32_t kFloat = onnx::TensorProto::FLOAT;
constexpr int32_t kInt64 = onnx::TensorProto::INT64;

// `g` compiled for ascend910b (the job's passes, the kernels) and run on
// them, as the conformance test does.
Expected<ops::TensorMap> runCompiled(Graph g, const ops::TensorMap &inputs) {
  KILN_ASSIGN_OR_RETURN(driver::ResolvedJob job,
                        driver::resolveJob(std::nullopt, driver::JobSettings{}, DType::F32));
  driver::KernelSettings settings;
  settings.dir = std::string(KILN_BINARY_DIR) + "/onnx-conformance-cache";
  settings.dump_dir = "";
  std::string cache_dir;
  auto cache = driver::openKernelCache(settings, cache_dir);
  KILN_RETURN_IF_ERROR(driver::compileGraph(g, job, {}, false).status());
  KILN_ASSIGN_OR_RETURN(auto kernels,
                        driver::compileJobKernels(g, job, settings, nullptr, cache.get()));
  KILN_ASSIGN_OR_RETURN(auto executor, runtime::Executor::create(g, std::move(kernels.kernels)));
  return executor->run(inputs);
}

struct LossCase {
  std::string op;
  std::string reduction;
  bool weights = false;
  bool ignore = false;
};

// The loss over scores [3, 4, 2] and labels [3, 2]; checks d loss / d
// scores against central differences.
void checkLossGradient(const LossCase &lc) {
  SCOPED_TRACE(lc.op + " " + lc.reduction + (lc.weights ? " weights" : "") +
               (lc.ignore ? " ignore_index" : ""));
  OnnxTestModel m(13);
  m.input("scores", kFloat, {3, 4, 2});
  m.input("labels", kInt64, {3, 2});
  std::vector<std::string> inputs = {"scores", "labels"};
  if (lc.weights) {
    m.input("weights", kFloat, {4});
    inputs.push_back("weights");
  }
  auto &n = m.node(lc.op, inputs, {"loss"});
  OnnxTestModel::attr(n, "reduction", lc.reduction);
  if (lc.ignore)
    OnnxTestModel::attr(n, "ignore_index", int64_t{2});
  if (lc.reduction == "none") { // a scalar to differentiate
    OnnxTestModel::attr(m.node("ReduceSum", {"loss"}, {"total"}), "keepdims", int64_t{0});
    m.output("total");
  } else {
    m.output("loss");
  }
  auto model = m.import();
  ASSERT_TRUE(model) << model.message();
  Graph &g = model->graph;
  ops::OpBuilder b(g);
  const ValueId scores = g.findInput("scores")->value;
  auto grads = autodiff::gradients(b, g.outputs()[0].value, {scores});
  ASSERT_TRUE(grads) << grads.message();
  g.addOutput("grad", (*grads)[0]);

  ops::TensorMap in;
  in["scores"] = testing::randomTensor({DType::F32, {3, 4, 2}}, 11, -2, 2);
  in["labels"] = Tensor::fromInts(DType::I64, {3, 2}, {0, 2, 3, 1, 2, 2});
  if (lc.weights)
    in["weights"] = Tensor::fromFloats(DType::F32, {4}, {0.5f, 1.0f, 2.0f, 1.5f});
  if (lc.op == "NegativeLogLikelihoodLoss") // log-probabilities as the input
    in["scores"] = testing::randomTensor({DType::F32, {3, 4, 2}}, 11, -3, -0.1f);
  auto out = ops::interpret(g, in);
  ASSERT_TRUE(out) << out.message();
  const Tensor &grad = out->at("grad");
  const std::string loss_name = g.outputs()[0].name;
  auto compiled = runCompiled(g, in); // the training graph lowers to kernels
  ASSERT_TRUE(compiled) << compiled.message();
  EXPECT_EQ(firstMismatch(compiled->at("grad"), grad, 1e-4, 1e-6), "");
  EXPECT_EQ(firstMismatch(compiled->at(loss_name), out->at(loss_name), 1e-4, 1e-6), "");
  const double eps = 1e-2;
  for (int64_t i = 0; i < 24; ++i) {
    ops::TensorMap plus = in, minus = in;
    plus["scores"].setFloat(i, in["scores"].getFloat(i) + float(eps), OverflowMode::InfNan);
    minus["scores"].setFloat(i, in["scores"].getFloat(i) - float(eps), OverflowMode::InfNan);
    auto lp = ops::interpret(g, plus), lm = ops::interpret(g, minus);
    ASSERT_TRUE(lp && lm);
    const double fd =
        (double(lp->at(loss_name).getFloat(0)) - double(lm->at(loss_name).getFloat(0))) / (2 * eps);
    EXPECT_NEAR(grad.getFloat(i), fd, 2e-3 + 2e-2 * std::abs(fd)) << "element " << i;
  }
}

TEST(OnnxLoss, SoftmaxCrossEntropyIsDifferentiable) {
  checkLossGradient({"SoftmaxCrossEntropyLoss", "mean"}); // the fused CrossEntropyLoss
  checkLossGradient({"SoftmaxCrossEntropyLoss", "mean", false, true});
  checkLossGradient({"SoftmaxCrossEntropyLoss", "mean", true, true});
  checkLossGradient({"SoftmaxCrossEntropyLoss", "sum", true});
  checkLossGradient({"SoftmaxCrossEntropyLoss", "none", false, true});
}

// ONNX's mean over the kept rows is 0 / 0 where every label is ignore_index:
// NaN, on the interpreter and compiled, fused (SoftmaxCrossEntropyLoss's
// plain mean) or not (NegativeLogLikelihoodLoss).
TEST(OnnxLoss, AMeanOverNoKeptRowIsNaN) {
  for (const char *op : {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"}) {
    OnnxTestModel m(13);
    m.input("scores", kFloat, {3, 4});
    m.input("labels", kInt64, {3});
    auto &n = m.node(op, {"scores", "labels"}, {"loss"});
    OnnxTestModel::attr(n, "ignore_index", int64_t{2});
    m.output("loss");
    auto model = m.import();
    ASSERT_TRUE(model) << model.message();
    ops::TensorMap in{{"scores", testing::randomTensor({DType::F32, {3, 4}}, 5, -3, -0.1f)},
                      {"labels", Tensor::fromInts(DType::I64, {3}, {2, 2, 2})}};
    auto out = ops::interpret(model->graph, in);
    ASSERT_TRUE(out) << out.message();
    EXPECT_TRUE(std::isnan(out->at("loss").getFloat(0))) << op;
    auto compiled = runCompiled(model->graph, in);
    ASSERT_TRUE(compiled) << compiled.message();
    EXPECT_TRUE(std::isnan(compiled->at("loss").getFloat(0))) << op;
    // One kept row: its loss alone, -log softmax(scores[1])[1] (the scores
    // are the log-probabilities themselves for NLL).
    in["labels"] = Tensor::fromInts(DType::I64, {3}, {2, 1, 2});
    out = ops::interpret(model->graph, in);
    ASSERT_TRUE(out) << out.message();
    const Tensor &s = in.at("scores");
    double sum = 0;
    for (int64_t j = 0; j < 4; ++j)
      sum += std::exp(double(s.getFloat(4 + j)));
    const double picked = s.getFloat(4 + 1);
    const double want =
        std::string(op) == "NegativeLogLikelihoodLoss" ? -picked : std::log(sum) - picked;
    EXPECT_NEAR(out->at("loss").getFloat(0), want, 1e-5) << op;
  }
}

// Without ONNX's ignore_index no label is ignored: -100 (kiln's own default)
// is outside the classes like any other, on the interpreter and in the
// check of the input before a compiled run; with ignore_index -100 its row
// takes no part.
TEST(OnnxLoss, WithoutIgnoreIndexEveryLabelIsAClass) {
  for (bool ignore : {false, true}) {
    SCOPED_TRACE(ignore ? "ignore_index -100" : "no ignore_index");
    OnnxTestModel m(13);
    m.input("scores", kFloat, {3, 4});
    m.input("labels", kInt64, {3});
    auto &n = m.node("SoftmaxCrossEntropyLoss", {"scores", "labels"}, {"loss"});
    if (ignore)
      OnnxTestModel::attr(n, "ignore_index", int64_t{-100});
    m.output("loss");
    auto model = m.import();
    ASSERT_TRUE(model) << model.message();
    const Graph &g = model->graph;
    const Tensor labels = Tensor::fromInts(DType::I64, {3}, {0, -100, 1});
    const ops::TensorMap in{{"scores", testing::randomTensor({DType::F32, {3, 4}}, 5, -2, 2)},
                            {"labels", labels}};
    auto out = ops::interpret(g, in);
    const Status checked = ops::checkIndexInput(g, *g.findInput("labels"), labels, "labels");
    if (!ignore) {
      ASSERT_FALSE(out);
      EXPECT_NE(out.message().find("label -100 of row 1 is outside [0, 4)"), std::string::npos)
          << out.message();
      ASSERT_FALSE(checked);
      EXPECT_NE(checked.message().find("label -100 at position 1 ([1]) is outside [0, 4),"),
                std::string::npos)
          << checked.message();
      EXPECT_EQ(checked.message().find("ignore_index"), std::string::npos) << checked.message();
      continue;
    }
    ASSERT_TRUE(out) << out.message();
    EXPECT_TRUE(checked) << checked.message();
    const Tensor &s = in.at("scores");
    double want = 0;
    for (int64_t r : {0, 2}) { // the kept rows, labelled 0 and 1
      double sum = 0;
      for (int64_t j = 0; j < 4; ++j)
        sum += std::exp(double(s.getFloat(4 * r + j)));
      want += (std::log(sum) - s.getFloat(4 * r + (r == 0 ? 0 : 1))) / 2;
    }
    EXPECT_NEAR(out->at("loss").getFloat(0), want, 1e-5);
  }
}

TEST(OnnxLoss, NegativeLogLikelihoodIsDifferentiable) {
  checkLossGradient({"NegativeLogLikelihoodLoss", "mean"});
  checkLossGradient({"NegativeLogLikelihoodLoss", "mean", true, true});
  checkLossGradient({"NegativeLogLikelihoodLoss", "sum", false, true});
  checkLossGradient({"NegativeLogLikelihoodLoss", "none", true});
}

// Einsum by its definition: every assignment of the letters, the product
// of the operands' elements summed into the output's.
Tensor einsumByDefinition(const std::vector<std::string> &terms, const std::string &out,
                          const std::vector<Tensor> &xs) {
  std::map<char, int64_t> size;
  for (size_t t = 0; t < terms.size(); ++t)
    for (size_t a = 0; a < terms[t].size(); ++a)
      size[terms[t][a]] = xs[t].shape()[a];
  Shape out_shape;
  for (char ch : out)
    out_shape.push_back(size[ch]);
  Tensor y(TensorType{DType::F32, out_shape});
  std::vector<double> acc(y.numElements(), 0.0);
  std::vector<char> letters;
  for (auto &[ch, n] : size)
    letters.push_back(ch);
  std::map<char, int64_t> at;
  for (char ch : letters)
    at[ch] = 0;
  auto flat = [&](const std::string &term, const Shape &shape) {
    int64_t f = 0;
    for (size_t a = 0; a < term.size(); ++a)
      f = f * shape[a] + at[term[a]];
    return f;
  };
  for (;;) {
    double p = 1;
    for (size_t t = 0; t < terms.size(); ++t)
      p *= xs[t].getFloat(flat(terms[t], xs[t].shape()));
    acc[flat(out, out_shape)] += p;
    size_t k = 0;
    while (k < letters.size() && ++at[letters[k]] == size[letters[k]])
      at[letters[k++]] = 0;
    if (k == letters.size())
      break;
  }
  for (int64_t i = 0; i < y.numElements(); ++i)
    y.setFloat(i, float(acc[i]), OverflowMode::InfNan);
  return y;
}

Expected<ops::TensorMap> runEinsum(const std::string &equation, const std::vector<Shape> &shapes,
                                   std::vector<Tensor> &xs) {
  OnnxTestModel m(12);
  std::vector<std::string> names;
  ops::TensorMap in;
  for (size_t i = 0; i < shapes.size(); ++i) {
    names.push_back("x" + std::to_string(i));
    m.input(names.back(), kFloat, shapes[i]);
    xs.push_back(testing::randomTensor({DType::F32, shapes[i]}, 20 + i));
    in[names.back()] = xs.back();
  }
  OnnxTestModel::attr(m.node("Einsum", names, {"y"}), "equation", equation);
  m.output("y");
  return m.run(in);
}

TEST(OnnxEinsum, MatmulShapedEquationsAgreeWithTheDefinition) {
  struct Case {
    std::string equation;
    std::vector<Shape> shapes;
    std::vector<std::string> terms;
    std::string out;
  };
  const std::vector<Case> cases = {
      {"bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}, {"bij", "bjk"}, "bik"},
      {"bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}}, {"bhqd", "bhkd"}, "bhqk"},
      {"bhqk,bhkd->bhqd", {{1, 2, 3, 5}, {1, 2, 5, 4}}, {"bhqk", "bhkd"}, "bhqd"},
      {"ij,jk", {{3, 4}, {4, 2}}, {"ij", "jk"}, "ik"},
      {"ij,kj->ik", {{3, 4}, {2, 4}}, {"ij", "kj"}, "ik"},
      {"bij,bjk->bki", {{2, 3, 4}, {2, 4, 5}}, {"bij", "bjk"}, "bki"},
      {"...ij,...jk->...ik", {{2, 3, 4}, {2, 4, 5}}, {"bij", "bjk"}, "bik"},
      {"i,i->", {{5}, {5}}, {"i", "i"}, ""},
      {"ij->ji", {{3, 4}}, {"ij"}, "ji"},
  };
  for (const Case &c : cases) {
    std::vector<Tensor> xs;
    auto out = runEinsum(c.equation, c.shapes, xs);
    ASSERT_TRUE(out) << c.equation << ": " << out.message();
    EXPECT_EQ(firstMismatch(out->at("y"), einsumByDefinition(c.terms, c.out, xs), 1e-5, 1e-6), "")
        << c.equation;
  }
}

TEST(OnnxEinsum, OtherEquationsAreE12011NamingTheEquation) {
  for (auto [equation, shapes] : std::vector<std::pair<std::string, std::vector<Shape>>>{
           {"ii->i", {{3, 3}}},
           {"ij,jk,kl->il", {{2, 2}, {2, 2}, {2, 2}}},
           {"i.j,jk->ik", {{2, 2, 2}, {2, 2}}},
           {"ij,jk->iz", {{2, 2}, {2, 2}}},
           {"ij,jk->ik->i", {{2, 2}, {2, 2}}}}) {
    std::vector<Tensor> xs;
    auto out = runEinsum(equation, shapes, xs);
    ASSERT_FALSE(out) << equation;
    EXPECT_EQ(out.error().code(), kErrOnnxUnsupportedAttr) << out.message();
    EXPECT_NE(out.message().find("'" + equation + "'"), std::string::npos) << out.message();
  }
}

} // namespace
} // namespace kiln::frontend::onnx_import
