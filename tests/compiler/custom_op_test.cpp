// Custom ops end to end in the library: loading a folder, shapes, the
// reference kernel against hand computation, derived and declared gradients
// against finite differences, compiled kernels against the interpreter
// (alone, fused by TbeEltwiseFusionPass and by a fusion rule), the kernel
// cache key (loading, jobs and conflicts: custom_op_loading_test.cpp).
#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <gtest/gtest.h>

#include "compiler/autodiff/autodiff.h"
#include "compiler/codegen/kernel_builder.h"
#include "compiler/codegen/kernel_spec.h"
#include "compiler/codegen/lowering/custom_ops.h"
#include "compiler/codegen/op_lowering.h"
#include "compiler/frontend/custom_ops.h"
#include "ops/op_builder.h"
#include "passes/fusion/rules/rule_loader.h"
#include "tests/compiler/custom_op_test_util.h"
#include "tests/support/codegen_test_util.h"
#include "tests/support/gradient_check.h"
#include "tests/support/op_test_util.h"
#include "tests/support/pass_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

const std::string &kExamples = kCustomOpExamples;
const DType kFloats[] = {DType::F32, DType::F16, DType::BF16};

// Test ops of every shape of compute; the names start with T so they meet
// no built-in op.
const char *kTestOps = R"(<ops>
  <op name="TSoftmax" kind="reduce">
    <input name="x"/>
    <output name="y"/>
    <compute>y[i, j] = exp(x[i, j]) / sum(k, exp(x[i, k]))</compute>
  </op>
  <op name="TAffine" kind="broadcast">
    <input name="x"/>
    <input name="b"/>
    <output name="y"/>
    <attr name="alpha" type="float" default="1.5"/>
    <compute>y[i, j] = alpha * tanh(x[i, j]) + b[j] * x[i, j]</compute>
  </op>
  <op name="TMix" kind="elementwise">
    <input name="x"/>
    <input name="z"/>
    <output name="y"/>
    <compute>
      y[i] = select(x[i] &gt; 0, pow(x[i] * x[i] + 1, 0.75), abs(x[i]) * exp(x[i]))
             + max(x[i], z[i]) - min(x[i] * z[i], 0.25)
             + log(z[i] * z[i] + 1) * sqrt(z[i] * z[i] + 1) + rsqrt(x[i] * x[i] + 2)
    </compute>
  </op>
  <op name="TTwoOut" kind="reduce">
    <input name="x"/>
    <input name="w"/>
    <output name="lo"/>
    <output name="hi"/>
    <compute>
      lo[i] = sum(j, x[i, j] * w[j]);
      hi[i, j] = x[i, j] * x[i, j] * w[j] - sigmoid(x[i, j] / sum(k, w[k] * w[k]))
    </compute>
  </op>
  <op name="TRowMax" kind="reduce">
    <input name="x"/>
    <output name="m"/>
    <compute>m[i] = max(j, x[i, j])</compute>
    <gradient input="x">dx[i, j] = select(x[i, j] == max(k, x[i, k]), dm[i], 0)</gradient>
  </op>
  <op name="TRowMin" kind="reduce">
    <input name="x"/>
    <output name="m"/>
    <compute>m[i] = min(j, x[i, j]) + i</compute>
  </op>
</ops>
)";

// The suite's vocabulary: the examples' ops and the test ops.
std::shared_ptr<const ops::OpRegistry> &customOps() {
  static std::shared_ptr<const ops::OpRegistry> registry;
  return registry;
}

class CustomOps : public CustomOpFolders {
protected:
  static void SetUpTestSuite() {
    fs::path dir = fs::temp_directory_path() / ("kiln_custom_ops_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::ofstream(dir / "test_ops.xml") << kTestOps;
    auto loaded = frontend::loadCustomOps({kExamples, dir.string()});
    fs::remove_all(dir);
    ASSERT_TRUE(loaded.isOk()) << loaded.message();
    customOps() = *loaded;
  }
};

const ops::RegisteredOp *op(const std::string &name) { return customOps()->find(name); }

// A graph written in the suite's vocabulary.
Graph customGraph(const std::string &name) {
  Graph g(name);
  g.setVocabulary(customOps());
  return g;
}

Tensor run1(std::string_view name, const std::vector<Tensor> &inputs, const AttrMap &attrs = {}) {
  return testing::run1(name, inputs, attrs, OverflowMode::InfNan, customOps());
}

void expectMatches(const std::string &name, const std::vector<TensorType> &inputs,
                   const AttrMap &attrs = {}) {
  expectOpMatchesReference(name, inputs, attrs, {}, 1, customOps());
}

::testing::AssertionResult checkGradient(std::string_view name,
                                         const std::vector<GradCheckInput> &inputs,
                                         const AttrMap &attrs = {}, GradCheckOptions options = {}) {
  options.ops = customOps();
  return checkOpGradient(name, inputs, attrs, options);
}

TEST_F(CustomOps, LoadingRegistersOpsGradientsAndLowerings) {
  for (const char *name : {"SwishX", "SumSquares", "SwishXGrad0", "SumSquaresGrad0", "TSoftmax",
                           "TSoftmaxGrad0", "TAffineGrad1", "TRowMaxGrad0"}) {
    ASSERT_NE(op(name), nullptr) << name;
    EXPECT_TRUE(codegen::hasLowering(name, *customOps())) << name;
    EXPECT_EQ(ops::OpRegistry::builtin().find(name), nullptr) << name;
  }
  EXPECT_EQ(op("SwishX")->def.kind, ops::OpKind::Elementwise);
  EXPECT_EQ(op("SwishX")->def.compute, "y[i, j] = x[i, j] * sigmoid(x[i, j])");
  EXPECT_NE(op("SwishX")->def.source.find("examples/custom-ops/ops.xml:5"), std::string::npos);
  EXPECT_TRUE(static_cast<bool>(op("SwishX")->impl.grad));
  EXPECT_EQ(op("SumSquaresGrad0")->def.compute, "dx[i, j] = ds[i] * x[i, j] + ds[i] * x[i, j]");
  EXPECT_EQ(op("SumSquaresGrad0")->def.kind, ops::OpKind::Broadcast);
  EXPECT_EQ(op("SwishXGrad0")->def.compute,
            "dx[i, j] = dy[i, j] * sigmoid(x[i, j]) + dy[i, j] * (x[i, j] * (sigmoid(x[i, j]) * "
            "(1 - sigmoid(x[i, j]))))");
  EXPECT_EQ(op("SwishXGrad0")->def.kind, ops::OpKind::Elementwise);
  // The gradient ops themselves have no gradient.
  EXPECT_FALSE(static_cast<bool>(op("SwishXGrad0")->impl.grad));
  // A folder named twice (by a job file and the command line) loads once.
  auto twice = frontend::loadCustomOps({kExamples, kExamples});
  ASSERT_TRUE(twice.isOk()) << twice.message();
  EXPECT_EQ((*twice)->ownNames(),
            (std::vector<std::string>{"SumSquares", "SumSquaresGrad0", "SwishX", "SwishXGrad0"}));
}

TEST_F(CustomOps, ShapesFollowTheIndexVariables) {
  auto swish = inferOp("SwishX", {{DType::F16, {3, 5}}}, {}, customOps());
  ASSERT_TRUE(swish.isOk()) << swish.message();
  EXPECT_EQ((*swish)[0], (TensorType{DType::F16, {3, 5}}));
  auto sum = inferOp("SumSquares", {{DType::BF16, {2, 7}}}, {}, customOps());
  ASSERT_TRUE(sum.isOk()) << sum.message();
  EXPECT_EQ((*sum)[0], (TensorType{DType::BF16, {2}}));
  auto two = inferOp("TTwoOut", {{DType::F32, {2, 7}}, {DType::F32, {7}}}, {}, customOps());
  ASSERT_TRUE(two.isOk()) << two.message();
  EXPECT_EQ((*two)[0], (TensorType{DType::F32, {2}}));
  EXPECT_EQ((*two)[1], (TensorType{DType::F32, {2, 7}}));

  auto rank = inferOp("SumSquares", {{DType::F32, {4}}}, {}, customOps());
  ASSERT_FALSE(rank.isOk());
  EXPECT_NE(rank.message().find("examples/custom-ops/ops.xml"), std::string::npos);
  EXPECT_NE(rank.message().find("reads it with 2 indices"), std::string::npos) << rank.message();
  auto extents = inferOp("TAffine", {{DType::F32, {2, 3}}, {DType::F32, {4}}}, {}, customOps());
  ASSERT_FALSE(extents.isOk());
  EXPECT_NE(extents.message().find("op TAffine: index 'j' has extent 4 from axis 0 of b"),
            std::string::npos)
      << extents.message();
  auto dtype = inferOp("SwishX", {{DType::I32, {2, 3}}}, {}, customOps());
  ASSERT_FALSE(dtype.isOk());
}

TEST_F(CustomOps, ReferenceKernelMatchesAHandComputation) {
  const std::vector<float> v = {-3.0f, -0.5f, 0.0f, 0.25f, 1.0f, 4.0f};
  Tensor x = Tensor::fromFloats(DType::F32, {2, 3}, v);
  Tensor y = run1("SwishX", {x});
  Tensor s = run1("SumSquares", {x});
  ASSERT_EQ(y.shape(), (Shape{2, 3}));
  ASSERT_EQ(s.shape(), (Shape{2}));
  for (int i = 0; i < 6; ++i) {
    const double want = v[i] / (1.0 + std::exp(-double(v[i])));
    EXPECT_EQ(y.getFloat(i), static_cast<float>(want)) << i;
  }
  for (int r = 0; r < 2; ++r) {
    double want = 0;
    for (int c = 0; c < 3; ++c)
      want += double(v[r * 3 + c]) * v[r * 3 + c];
    EXPECT_EQ(s.getFloat(r), static_cast<float>(want)) << r;
  }
  // f16 storage: computed in double, rounded once.
  Tensor y16 = run1("SwishX", {x.castTo(DType::F16)});
  EXPECT_EQ(y16.dtype(), DType::F16);
  EXPECT_EQ(y16.getFloat(5), Tensor::scalar(DType::F16, 4.0 / (1.0 + std::exp(-4.0))).getFloat(0));

  // TSoftmax is the built-in Softmax.
  Tensor r = randomTensor({DType::F32, {3, 9}}, 7, -3, 3);
  Tensor mine = run1("TSoftmax", {r});
  Tensor builtin = run1("Softmax", {r}, {{"axis", int64_t{-1}}});
  EXPECT_EQ(compareTensors(mine, builtin, 1e-6, 1e-7), "");

  // An index variable read as a value, and an empty reduction.
  Tensor m = run1("TRowMin", {Tensor::fromFloats(DType::F32, {2, 2}, {3, 1, -2, 5})});
  EXPECT_EQ(m.toFloats(), (std::vector<float>{1, -1}));
  Tensor empty = run1("TRowMin", {Tensor(TensorType{DType::F32, {2, 0}})});
  EXPECT_TRUE(std::isinf(empty.getFloat(0)));
}

TEST_F(CustomOps, GradientsMatchFiniteDifferences) {
  EXPECT_TRUE(checkGradient("SwishX", {gradInput({DType::F32, {3, 4}}, -2, 2)}));
  EXPECT_TRUE(checkGradient("SumSquares", {gradInput({DType::F32, {3, 4}})}));
  EXPECT_TRUE(checkGradient("TSoftmax", {gradInput({DType::F32, {2, 5}}, -2, 2)}));
  EXPECT_TRUE(checkGradient("TAffine",
                            {gradInput({DType::F32, {3, 4}}), gradInput({DType::F32, {4}})},
                            {{"alpha", 0.75}}));
  // Kinks (select at 0, max and min at ties) are rare within a small step.
  GradCheckOptions fine;
  fine.eps = 1e-3;
  EXPECT_TRUE(checkGradient(
      "TMix",
      {gradInput({DType::F32, {12}}, -1.5f, 1.5f), gradInput({DType::F32, {12}}, -1.5f, 1.5f)}, {},
      fine));
  EXPECT_TRUE(
      checkGradient("TTwoOut", {gradInput({DType::F32, {3, 4}}), gradInput({DType::F32, {4}})}));
  // Declared: the max of each row takes the gradient.
  EXPECT_TRUE(checkGradient("TRowMax", {gradInput({DType::F32, {3, 4}})}, {}, fine));
}

// A max reduction without a declared gradient: the op is not differentiable,
// and autodiff says so when a gradient has to pass it.
TEST_F(CustomOps, UnderivableOpsHaveNoGradientRule) {
  ASSERT_NE(op("TRowMin"), nullptr);
  EXPECT_FALSE(static_cast<bool>(op("TRowMin")->impl.grad));
  EXPECT_EQ(op("TRowMinGrad0"), nullptr);
  EXPECT_NE(op("TRowMin")->no_gradient.find("cannot derive the gradient in input 'x'"),
            std::string::npos)
      << op("TRowMin")->no_gradient;
  EXPECT_EQ(op("SwishX")->no_gradient, "");

  Graph g = customGraph("t");
  ValueId x = g.addInput("x", {DType::F32, {2, 3}}, InputRole::Parameter);
  ops::OpBuilder b(g);
  ValueId m = b.create("TRowMin", "m", {x});
  ValueId loss = b.create("ReduceSum", "loss", {m});
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  auto grads = autodiff::gradients(b, loss, {x});
  ASSERT_FALSE(grads.isOk());
  EXPECT_NE(grads.message().find("op TRowMin (node 'm') is not differentiable"), std::string::npos)
      << grads.message();
}

TEST_F(CustomOps, CompiledKernelsMatchTheInterpreter) {
  for (DType d : kFloats) {
    expectMatches("SwishX", {{d, {3, 37}}});
    expectMatches("SumSquares", {{d, {5, 33}}});
    expectMatches("SwishXGrad0", {{d, {3, 37}}, {d, {3, 37}}});
    expectMatches("SumSquaresGrad0", {{d, {5, 33}}, {d, {5}}});
    expectMatches("TSoftmax", {{d, {4, 17}}});
    expectMatches("TSoftmaxGrad0", {{d, {4, 17}}, {d, {4, 17}}});
  }
  expectMatches("TAffine", {{DType::F32, {6, 9}}, {DType::F32, {9}}}, {{"alpha", 0.5}});
  expectMatches("TAffineGrad0", {{DType::F32, {6, 9}}, {DType::F32, {9}}, {DType::F32, {6, 9}}},
                {{"alpha", 0.5}});
  expectMatches("TAffineGrad1", {{DType::F32, {6, 9}}, {DType::F32, {9}}, {DType::F32, {6, 9}}});
  expectMatches("TMix", {{DType::F32, {40}}, {DType::F32, {40}}});
  expectMatches("TMixGrad0", {{DType::F32, {40}}, {DType::F32, {40}}, {DType::F32, {40}}});
  expectMatches("TMixGrad1", {{DType::F32, {40}}, {DType::F32, {40}}, {DType::F32, {40}}});
  expectMatches("TTwoOut", {{DType::F32, {3, 11}}, {DType::F32, {11}}});
  expectMatches(
      "TTwoOutGrad0",
      {{DType::F32, {3, 11}}, {DType::F32, {11}}, {DType::F32, {3}}, {DType::F32, {3, 11}}});
  expectMatches("TRowMax", {{DType::F16, {4, 10}}});
  expectMatches("TRowMaxGrad0", {{DType::F32, {4, 10}}, {DType::F32, {4}}});
  expectMatches("TRowMin", {{DType::F32, {4, 10}}});
  // tanh over a wide range, where its two formulas meet.
  Graph g = customGraph("tanh");
  ValueId x = g.addInput("x", {DType::F32, {4, 64}}, InputRole::Data);
  ValueId bias = g.addInput("b", {DType::F32, {64}}, InputRole::Data);
  ops::OpBuilder b(g);
  g.addOutput("y", b.create("TAffine", "affine", {x, bias}, {{"alpha", 1.0}}));
  ASSERT_TRUE(b.status().isOk());
  ops::TensorMap feed{{"x", randomTensor({DType::F32, {4, 64}}, 3, -12, 12)},
                      {"b", Tensor(TensorType{DType::F32, {64}})}};
  expectCompiledMatchesReference(g, feed);
}

// A custom elementwise op joins its neighbours in one vector kernel, and the
// fused kernel still computes what the interpreter does.
TEST_F(CustomOps, TbeEltwiseFusionPassFusesThem) {
  for (DType d : {DType::F32, DType::F16}) {
    Graph g = customGraph("t");
    ValueId x = g.addInput("x", {d, {4, 32}}, InputRole::Data);
    ValueId z = g.addInput("z", {d, {4, 32}}, InputRole::Data);
    ops::OpBuilder b(g);
    ValueId act = b.create("SwishX", "act", {x});
    ValueId mul = b.create("Mul", "mul", {act, z});
    ValueId neg = b.create("Neg", "neg", {mul});
    ValueId sum = b.create("SumSquares", "energy", {neg});
    ASSERT_TRUE(b.status().isOk()) << b.status().message();
    g.addOutput("y", neg);
    g.addOutput("s", sum);
    passes::PassResult r = runOnePass(g, "TbeEltwiseFusionPass");
    EXPECT_EQ(r.effect_times, 1);
    EXPECT_EQ(groupMemberNames(g, "act"), (std::vector<std::string>{"act", "mul", "neg"}));
    expectCompiledMatchesReference(g, randomInputs(g, 5));
  }
}

TEST_F(CustomOps, FusionRulesMayNameThem) {
  const std::string rules = folder("rules", {{"swish_scale.json", R"({
    "format": "kiln.fusion-rule", "version": 1, "name": "SwishScaleFusionRule",
    "group": "UBFusion", "priority": 4250, "default": "on",
    "description": "Fuses a custom SwishX with the scale after it.",
    "kernel": "swish_scale", "intermediates": "f32",
    "pattern": {"root": "mul", "nodes": [
      {"id": "act", "op": "SwishX", "inputs": ["$x"]},
      {"id": "mul", "op": "Mul", "inputs": ["act", "$w"], "commutative": true}]}
  })"}});
  // Only a job whose ops include SwishX may name it.
  auto without = passes::rules::registryWithFusionRules(passes::PassRegistry::builtin(), {rules});
  ASSERT_FALSE(without.isOk());
  EXPECT_NE(without.message().find("SwishX"), std::string::npos) << without.message();
  auto registry = passes::rules::registryWithFusionRules(passes::PassRegistry::builtin(), {rules},
                                                         *customOps());
  ASSERT_TRUE(registry.isOk()) << registry.message();
  Graph g = customGraph("t");
  ValueId x = g.addInput("x", {DType::F16, {4, 32}}, InputRole::Data);
  ValueId w = g.addInput("w", {DType::F16, {32}}, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId mul = b.create("Mul", "mul", {w, b.create("SwishX", "act", {x})});
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  g.addOutput("y", mul);
  runPasses(g, onlyFusionPass("ascend910b", "SwishScaleFusionRule", *registry), *registry);
  ASSERT_EQ(g.groups().size(), 1u);
  EXPECT_EQ(g.groups()[0].formed_by, "SwishScaleFusionRule");
  EXPECT_EQ(groupMemberNames(g, "act"), (std::vector<std::string>{"act", "mul"}));
  expectCompiledMatchesReference(g, randomInputs(g, 2));
}

// Autodiff through custom ops: the training graph's kernels, the derived
// gradient ops among them, match the interpreter.
TEST_F(CustomOps, TrainingGraphThroughCustomOpsCompiles) {
  Graph g = customGraph("t");
  ValueId x = g.addInput("x", {DType::F32, {4, 16}}, InputRole::Parameter);
  ValueId w = g.addInput("w", {DType::F32, {16}}, InputRole::Parameter);
  ops::OpBuilder b(g);
  ValueId sm = b.create("TSoftmax", "sm", {b.create("SwishX", "act", {x})});
  ValueId aff = b.create("TAffine", "aff", {sm, w});
  ValueId loss = b.create("ReduceSum", "loss", {b.create("SumSquares", "ss", {aff})});
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  auto grads = autodiff::gradients(b, loss, {x, w});
  ASSERT_TRUE(grads.isOk()) << grads.message();
  g.addOutput("loss", loss);
  g.addOutput("dx", (*grads)[0]);
  g.addOutput("dw", (*grads)[1]);
  runOnePass(g, "TbeEltwiseFusionPass");
  CompareOptions tol;
  tol.rtol = 1e-4;
  expectCompiledMatchesReference(g, randomInputs(g, 9), tol);
}

// x / sum(k, x[i, k]): the row sum is a materialised stage of shape [rows, 1],
// computed once per row, and the rows are the kernel's parallel axis.
TEST_F(CustomOps, ARowReductionInsideAnElementwiseExpressionIsAStage) {
  Graph g = customGraph("t");
  ValueId x = g.addInput("x", {DType::F32, {6, 16}}, InputRole::Data);
  ops::OpBuilder b(g);
  g.addOutput("y", b.create("TSoftmax", "sm", {x}));
  ASSERT_TRUE(b.status().isOk());
  const std::vector<codegen::KernelSpec> kernels = codegen::partitionKernels(g);
  ASSERT_EQ(kernels.size(), 1u);
  auto build = codegen::buildKernel(g, kernels[0]);
  ASSERT_TRUE(build.isOk()) << build.message();
  const codegen::KernelProgram &p = build->program;
  ASSERT_EQ(p.stages.size(), 2u) << codegen::programToString(p);
  EXPECT_EQ(p.stages[0].name, "sm.sum0");
  EXPECT_EQ(p.stages[0].shape, (Shape{6, 1}));
  EXPECT_TRUE(p.stages[0].materialized);
  EXPECT_FALSE(codegen::containsReduce(p.stages[1].body));
  EXPECT_EQ(p.outer_rank, 1);
}

TEST_F(CustomOps, TheCacheKeyHoldsTheCompute) {
  Graph g = customGraph("t");
  ValueId x = g.addInput("x", {DType::F32, {2, 3}}, InputRole::Data);
  ops::OpBuilder b(g);
  g.addOutput("y", b.create("SwishX", "act", {x}));
  const std::vector<codegen::KernelSpec> kernels = codegen::partitionKernels(g);
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_NE(codegen::canonicalKernelText(g, kernels[0])
                .find("SwishX(%in0) compute=\"y[i, j] = x[i, j] * sigmoid(x[i, j])\""),
            std::string::npos)
      << codegen::canonicalKernelText(g, kernels[0]);
}

} // namespace
} // namespace kiln::testing
