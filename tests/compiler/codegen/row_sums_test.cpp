// Sums over the tokens split by rows (kernel_program.h, "row sums"): a bias
// gradient (SumToShape), a whole sum and RMSNorm's weight gradient inside its
// fused backward kernel run on every row, agree with the reference
// interpreter, and give the same bits on every run and any thread count.
#include <cstring>
#include <optional>

#include <gtest/gtest.h>

#include "compiler/autodiff/autodiff.h"
#include "compiler/codegen/kernel_compiler.h"
#include "ops/op_builder.h"
#include "ops/op_verifier.h"
#include "runtime/executor.h"
#include "target/target.h"
#include "tests/support/codegen_test_util.h"
#include "tests/support/pass_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

const DType kFloats[] = {DType::F32, DType::F16, DType::BF16};

codegen::CompiledKernels compile(const Graph &g) {
  auto target = target::loadTarget("ascend910b");
  EXPECT_TRUE(target.isOk());
  auto kernels = codegen::compileKernels(g, *target, {});
  EXPECT_TRUE(kernels.isOk()) << (kernels ? "" : kernels.message());
  return kernels ? std::move(*kernels) : codegen::CompiledKernels{};
}

// The kernel holding node `node`, and its program built again from its spec.
struct KernelOf {
  const codegen::CompiledKernel *kernel = nullptr;
  codegen::KernelProgram program;
};
std::optional<KernelOf> kernelOf(const codegen::CompiledKernels &kernels, const Graph &g,
                                 const std::string &node) {
  const NodeId id = g.findNode(node);
  for (const codegen::CompiledKernel &k : kernels.kernels)
    for (NodeId m : k.spec.members)
      if (m == id) {
        auto build = codegen::buildKernel(g, k.spec);
        if (!build)
          return std::nullopt;
        return KernelOf{&k, std::move(build->program)};
      }
  return std::nullopt;
}

// What the runtime launches by says what the program computes.
void expectLaunchOfProgram(const KernelOf &k) {
  const codegen::KernelProgram &p = k.program;
  const executable::KernelLaunch &launch = k.kernel->launch;
  EXPECT_EQ(launch.rows, p.rows());
  EXPECT_EQ(launch.scratch_elements_per_row, p.scratchElementsPerRow());
  ASSERT_EQ(launch.row_sums.size(), p.outputs.size());
  for (size_t o = 0; o < p.outputs.size(); ++o)
    EXPECT_EQ(launch.row_sums[o] != 0, p.outputs[o].row_sum_stage >= 0) << "output " << o;
}

Graph sumToShapeGraph(DType dtype, Shape in, Shape out) {
  Graph g("bias_grad");
  ValueId x = g.addInput("x", {dtype, std::move(in)}, InputRole::Data);
  ops::OpBuilder b(g);
  g.addOutput("db", b.create("SumToShape", "db", {x}, {{"shape", std::move(out)}}));
  EXPECT_TRUE(b.status().isOk()) << b.status().message();
  return g;
}

// Every output of `g` run on `threads` threads, as bytes.
std::vector<std::vector<uint8_t>> runBytes(const Graph &g, const ops::TensorMap &feed,
                                           int threads) {
  runtime::ExecutorOptions options;
  options.threads = threads;
  auto ex = runtime::Executor::create(g, compile(g), options);
  EXPECT_TRUE(ex.isOk()) << (ex ? "" : ex.message());
  std::vector<std::vector<uint8_t>> bytes;
  if (!ex)
    return bytes;
  auto got = (*ex)->run(feed);
  EXPECT_TRUE(got.isOk()) << (got ? "" : got.message());
  if (!got)
    return bytes;
  for (const auto &[name, t] : *got) {
    const auto *p = static_cast<const uint8_t *>(t.data());
    bytes.emplace_back(p, p + t.byteSize());
  }
  return bytes;
}

TEST(RowSums, ABiasGradientRunsOnEveryTokenRow) {
  // 2,048 token rows of 96: tiles of 32K elements make 6 tiles of partials.
  for (DType d : kFloats) {
    SCOPED_TRACE(dtypeName(d));
    Graph g = sumToShapeGraph(d, {8, 256, 96}, {96});
    codegen::CompiledKernels kernels = compile(g);
    const std::optional<KernelOf> k = kernelOf(kernels, g, "db");
    ASSERT_TRUE(k);
    const codegen::KernelProgram *p = &k->program;
    expectLaunchOfProgram(*k);
    EXPECT_TRUE(p->hasRowSums()) << codegen::programToString(*p);
    EXPECT_EQ(p->rows(), 8 * 256);
    EXPECT_NE(codegen::programToString(*p).find("summed over rows"), std::string::npos);
    expectCompiledMatchesReference(g, randomInputs(g, 3));
  }
}

// The loss of a batch: the mean over the token rows of their cross
// entropies is a sum of per-row terms, so its kernel runs on every row
// instead of one row holding the batch, in tiles of many rows.
TEST(RowSums, TheLossKernelRunsOnEveryTokenRow) {
  for (DType d : kFloats) {
    SCOPED_TRACE(dtypeName(d));
    Graph g("loss");
    ValueId logits = g.addInput("logits", {d, {512, 96}}, InputRole::Data);
    ValueId labels = g.addInput("labels", {DType::I64, {512}}, InputRole::Data);
    ops::OpBuilder b(g);
    g.addOutput("loss", b.create("CrossEntropyLoss", "loss", {logits, labels},
                                 {{"ignore_index", int64_t{5}}}));
    ASSERT_TRUE(b.status().isOk()) << b.status().message();
    codegen::CompiledKernels kernels = compile(g);
    const std::optional<KernelOf> k = kernelOf(kernels, g, "loss");
    ASSERT_TRUE(k);
    expectLaunchOfProgram(*k);
    EXPECT_TRUE(k->program.hasRowSums()) << codegen::programToString(k->program);
    EXPECT_EQ(k->program.rows(), 512);
    // Tiles are sized by a row's 96 logits, not by its one partial.
    EXPECT_EQ(k->kernel->launch.row_elements, 96);
    const ops::TensorMap feed = randomInputs(g, 9, -4.0f, 4.0f);
    expectCompiledMatchesReference(g, feed);
    EXPECT_EQ(runBytes(g, feed, 2), runBytes(g, feed, 1));
  }
}

TEST(RowSums, SumsOfOtherShapesAgreeWithTheReference) {
  for (DType d : kFloats) {
    SCOPED_TRACE(dtypeName(d));
    // The size-1 axis is summed too; a scalar sum's row is one element.
    for (const auto &[in, out] : std::vector<std::pair<Shape, Shape>>{
             {{300, 7, 5}, {1, 5}}, {{64, 300}, {}}, {{1000, 3}, {3}}, {{3, 1}, {1}}}) {
      Graph g = sumToShapeGraph(d, in, out);
      expectCompiledMatchesReference(g, randomInputs(g, 5));
    }
    // Sums of 2,000 and 120,000 terms in [-2, 2) that cancel: in f32 the
    // error is relative to the sum of magnitudes, not to the result.
    CompareOptions cancelling;
    cancelling.atol = d == DType::F32 ? 1e-6 * 2 * 120000 : -1;
    expectOpMatchesReference("ReduceSum", {{d, {40, 50, 60}}},
                             {{"axes", Shape{}}, {"keepdims", false}}, cancelling);
    expectOpMatchesReference("ReduceSum", {{d, {40, 50, 60}}},
                             {{"axes", Shape{0, 1}}, {"keepdims", true}}, cancelling);
  }
}

// A row sum whose rounding overflows raises the float status, as the
// reference does (f16's largest finite value is 65504).
TEST(RowSums, AnOverflowingSumRaisesTheStatus) {
  Graph g = sumToShapeGraph(DType::F16, {2048, 16}, {16});
  ops::TensorMap feed{
      {"x", Tensor::fromFloats(DType::F16, {2048, 16}, std::vector<float>(2048 * 16, 60.0f))}};
  expectCompiledMatchesReference(g, feed);
}

TEST(RowSums, SameBitsOnEveryRunAndThreadCount) {
  Graph g = sumToShapeGraph(DType::F32, {16, 256, 64}, {64});
  const ops::TensorMap feed = randomInputs(g, 11);
  const auto first = runBytes(g, feed, 2);
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(runBytes(g, feed, 2), first);
  EXPECT_EQ(runBytes(g, feed, 1), first);
  EXPECT_EQ(runBytes(g, feed, 3), first);
}

// RMSNorm over rows of 128 and its gradient, fused by RmsNormFusionPass:
// the backward kernel's weight gradient (a sum over the tokens) is a row
// sum, so the kernel runs on every token row instead of as one row.
struct NormGraph {
  Graph g{"norm"};
  ops::TensorMap feed;
  explicit NormGraph(DType dtype, int64_t batch = 4) {
    const Shape shape{batch, 96, 128};
    ValueId x = input("x", {dtype, shape});
    ValueId r = input("r", {DType::F32, shape});
    ValueId w = input("w", {dtype, {128}});
    ops::OpBuilder b(g);
    ValueId xf = dtype == DType::F32 ? x : b.create("Cast", "to_f32", {x}, {{"dtype", DType::F32}});
    ValueId ms = b.create("ReduceMean", "mean", {b.create("Mul", "square", {xf, xf})},
                          {{"axes", Shape{2}}, {"keepdims", true}});
    ValueId inv = b.create("Rsqrt", "rsqrt",
                           {b.create("Add", "add_eps", {ms, b.constant(1e-6, DType::F32, "eps")})});
    ValueId y = b.create("Mul", "normalize", {xf, inv});
    if (dtype != DType::F32)
      y = b.create("Cast", "to_dtype", {y}, {{"dtype", dtype}});
    y = b.create("Mul", "mul_weight", {y, w});
    ValueId yf = dtype == DType::F32 ? y : b.create("Cast", "y_f32", {y}, {{"dtype", DType::F32}});
    ValueId loss = b.create("ReduceSum", "loss", {b.create("Mul", "weighted", {yf, r})});
    auto grads = autodiff::gradients(b, loss, {x, w});
    EXPECT_TRUE(grads) << grads.message();
    g.addOutput("dx", (*grads)[0]);
    g.addOutput("dw", (*grads)[1]);
    EXPECT_TRUE(ops::verifyGraph(g).isOk());
  }
  ValueId input(const std::string &name, TensorType type) {
    feed[name] = randomTensor(type, 29 + feed.size(), -2.0f, 2.0f);
    return g.addInput(name, std::move(type), InputRole::Data);
  }
};

TEST(RowSums, TheNormGradientKernelRunsOnEveryTokenRow) {
  for (DType d : kFloats) {
    SCOPED_TRACE(dtypeName(d));
    NormGraph n(d);
    runOnePass(n.g, "RmsNormFusionPass");
    const NodeId dw = n.g.value(n.g.findOutput("dw")->value).producer;
    codegen::CompiledKernels kernels = compile(n.g);
    const std::optional<KernelOf> k = kernelOf(kernels, n.g, n.g.node(dw).name);
    ASSERT_TRUE(k);
    const codegen::KernelProgram *p = &k->program;
    expectLaunchOfProgram(*k);
    EXPECT_TRUE(p->hasRowSums()) << codegen::programToString(*p);
    EXPECT_EQ(p->rows(), 4 * 96);
    CompareOptions tolerance;
    // The weight gradient sums 384 products that partly cancel.
    tolerance.atol = d == DType::F32 ? 1e-4 : -1;
    expectCompiledMatchesReference(n.g, n.feed, tolerance);
    EXPECT_EQ(runBytes(n.g, n.feed, 2), runBytes(n.g, n.feed, 1));
  }
}

// A batch of one (a data-parallel replica's share): the sum over the tokens
// has no level for the unit batch axis, and its rows take a leading unit
// axis to line up with dx's [1, 96, 128].
TEST(RowSums, ABatchOfOneStillRunsOnEveryTokenRow) {
  NormGraph n(DType::BF16, 1);
  runOnePass(n.g, "RmsNormFusionPass");
  const NodeId dw = n.g.value(n.g.findOutput("dw")->value).producer;
  codegen::CompiledKernels kernels = compile(n.g);
  const std::optional<KernelOf> k = kernelOf(kernels, n.g, n.g.node(dw).name);
  ASSERT_TRUE(k);
  expectLaunchOfProgram(*k);
  EXPECT_TRUE(k->program.hasRowSums()) << codegen::programToString(k->program);
  EXPECT_EQ(k->program.rows(), 96);
  expectCompiledMatchesReference(n.g, n.feed);
  EXPECT_EQ(runBytes(n.g, n.feed, 2), runBytes(n.g, n.feed, 1));
}

} // namespace
} // namespace kiln::testing
