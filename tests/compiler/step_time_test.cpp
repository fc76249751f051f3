// The cost model: ring collectives by their formulas, a kernel as its
// roofline, and a compiled tiny Qwen step's communication as the sum of its
// collectives and the data-parallel reduction.
#include "compiler/parallel/step_time.h"

#include <filesystem>
#include <unistd.h>

#include <gtest/gtest.h>

#include "compiler/codegen/kernel_spec.h"
#include "compiler/driver/training.h"
#include "ops/op_builder.h"

namespace kiln::parallel {
namespace {

target::Target target910b() {
  auto t = target::loadTarget("ascend910b");
  EXPECT_TRUE(t) << t.message();
  return *t;
}

TEST(StepTime, RingCollectivesFollowTheirFormulas) {
  const Link link{10e9, 5e-6};
  // All-reduce: 2(n-1) steps, each a latency and bytes/n.
  EXPECT_DOUBLE_EQ(ringAllReduceSeconds(8e9, 8, link), 14 * (5e-6 + 1e9 / 10e9));
  EXPECT_DOUBLE_EQ(ringReduceScatterSeconds(8e9, 8, link), 7 * (5e-6 + 1e9 / 10e9));
  EXPECT_DOUBLE_EQ(ringAllGatherSeconds(8e9, 8, link), 7 * (5e-6 + 1e9 / 10e9));
  EXPECT_EQ(ringAllReduceSeconds(8e9, 1, link), 0) << "one rank sends nothing";
}

// A program of one graph on one device, its kernels as the compiler cuts them.
TrainingProgram oneGraphProgram(Graph graph) {
  TrainingProgram p;
  p.parallel.devices = p.parallel.dp = p.parallel.tp = 1;
  for (codegen::KernelSpec &spec : codegen::partitionKernels(graph)) {
    codegen::CompiledKernel k;
    k.spec = std::move(spec);
    p.step.kernels.kernels.push_back(std::move(k));
  }
  p.step.graph = std::move(graph);
  return p;
}

TEST(StepTime, AKernelIsItsRoofline) {
  const target::Target t = target910b();
  // [m, k] x [k, n] in f16: 2mnk FLOPs on the cube, the three matrices through HBM.
  for (auto [m, k, n] : {std::tuple{256, 512, 1024}, std::tuple{4096, 4096, 4096}}) {
    Graph g("matmul");
    ops::OpBuilder b(g);
    ValueId a = g.addInput("a", {DType::F16, {m, k}}, InputRole::Data);
    ValueId w = g.addInput("w", {DType::F16, {k, n}}, InputRole::Data);
    g.addOutput("c", b.create("MatMul", "mm", {a, w}));
    auto time = predictStepTime(oneGraphProgram(std::move(g)), t);
    ASSERT_TRUE(time) << time.message();
    const double cube = 2.0 * m * n * k / (t.peak_tflops.at(DType::F16) * 1e12);
    const double memory = 2.0 * (m * k + k * n + m * n) / (t.hbm_bandwidth_gbps * 1e9);
    EXPECT_DOUBLE_EQ(time->kernels, std::max(cube, memory)) << m << "x" << k << "x" << n;
    EXPECT_EQ(time->kernels > memory, m == 4096) << "the small one is memory-bound";
    EXPECT_EQ(time->data_parallel, 0);
  }
  // A Reshape that keeps its dtype is a view: nothing runs.
  Graph g("view");
  ops::OpBuilder b(g);
  ValueId x = g.addInput("x", {DType::F16, {64, 64}}, InputRole::Data);
  g.addOutput("y", b.create("Reshape", "r", {x}, {{"shape", std::vector<int64_t>{4096}}}));
  auto view = predictStepTime(oneGraphProgram(std::move(g)), t);
  ASSERT_TRUE(view) << view.message();
  EXPECT_EQ(view->kernels, 0);
}

TEST(StepTime, AMissingFigureIsNamed) {
  target::Target t = target910b();
  Graph g("matmul");
  ops::OpBuilder b(g);
  ValueId a = g.addInput("a", {DType::F32, {16, 16}}, InputRole::Data);
  g.addOutput("c", b.create("MatMul", "mm", {a, a}));
  auto time = predictStepTime(oneGraphProgram(g), t);
  ASSERT_FALSE(time);
  EXPECT_NE(time.message().find("peak_tflops.f32"), std::string::npos) << time.message();
  t.peak_tflops[DType::F32] = 100;
  t.hbm_bandwidth_gbps = 0;
  time = predictStepTime(oneGraphProgram(g), t);
  ASSERT_FALSE(time);
  EXPECT_NE(time.message().find("hbm_bandwidth_gbps"), std::string::npos) << time.message();
}

class TinyStepTime : public ::testing::Test {
protected:
  void SetUp() override {
    flags_.source = "test";
    flags_.target = "ascend910b";
    flags_.dtype = DType::F16;
    auto job = driver::resolveJob(std::nullopt, flags_, DType::F16);
    ASSERT_TRUE(job) << job.message();
    job_ = std::make_unique<driver::ResolvedJob>(std::move(*job));
    kernels_.compile_objects = false;
  }

  TrainingProgram program(int dp, int tp, int zero, int pp = 1, int micro_batches = 1,
                          bool sequence_parallel = false) {
    auto layout = resolveParallelConfig(dp * tp * pp, dp, tp, zero, 4, micro_batches, pp);
    EXPECT_TRUE(layout) << layout.message();
    layout->sequence_parallel = sequence_parallel;
    driver::ModelRequest model{std::string(KILN_SOURCE_DIR) + "/examples/qwen-tiny/config.json",
                               true, 4, 16};
    auto p = driver::compileTrainingProgram(model, *job_, kernels_, *layout);
    EXPECT_TRUE(p) << p.message();
    return std::move(*p);
  }

  driver::JobSettings flags_;
  std::unique_ptr<driver::ResolvedJob> job_;
  driver::KernelSettings kernels_;
};

TEST_F(TinyStepTime, CommunicationIsTheCollectivesAndTheGradientSum) {
  const TrainingProgram p = program(2, 2, 0);
  const target::Target &t = job_->target;
  auto time = predictStepTime(p, t);
  ASSERT_TRUE(time) << time.message();
  const Link intra{t.interconnect.intra_node_gbps * 1e9,
                   t.interconnect.intra_node_latency_us * 1e-6};
  // Tensor parallel: an all-reduce of every TensorParallelReduce and Max result.
  double tp = 0;
  int collectives = 0;
  for (const Node &node : p.step.graph.nodes())
    if (node.op == "TensorParallelReduce" || node.op == "TensorParallelMax") {
      const TensorType &type = p.step.graph.type(node.outputs[0]);
      tp += ringAllReduceSeconds(
          static_cast<double>(numElements(type.shape) * dtypeSize(type.dtype)), 2, intra);
      ++collectives;
    }
  EXPECT_GT(collectives, 0);
  EXPECT_NEAR(time->tensor_parallel, tp, 1e-15);
  // Data parallel: the gradients all-reduced, two scalars over all four.
  double grads = 0;
  for (const Parameter &param : p.params)
    grads += static_cast<double>(numElements(param.type.shape) * dtypeSize(param.type.dtype));
  EXPECT_NEAR(time->data_parallel,
              ringAllReduceSeconds(grads, 2, intra) + 2 * ringAllReduceSeconds(8, 4, intra), 1e-15);
  // ZeRO-2 reduce-scatters them and gathers the weights back: the same bytes.
  auto zero2 = predictStepTime(program(2, 2, 2), t);
  ASSERT_TRUE(zero2) << zero2.message();
  EXPECT_NEAR(zero2->data_parallel,
              2 * ringReduceScatterSeconds(grads, 2, intra) + 2 * ringAllReduceSeconds(8, 4, intra),
              1e-15);
  EXPECT_EQ(time->tokens, 4 * 16);
  EXPECT_DOUBLE_EQ(time->tokensPerSecondPerDevice(), 64 / time->seconds() / 4);
}

// Sequence parallelism: each all-gather and reduce-scatter is half a ring
// all-reduce of the whole sequence's tensor (the gather's output, the
// scatter's input); the f on each norm weight sums its gradient (an
// all-reduce, as every TensorParallelReduce).
TEST_F(TinyStepTime, SequenceParallelCountsItsGathersAndScatters) {
  const TrainingProgram p = program(2, 2, 0, 1, 1, true);
  const target::Target &t = job_->target;
  auto time = predictStepTime(p, t);
  ASSERT_TRUE(time) << time.message();
  const Link intra{t.interconnect.intra_node_gbps * 1e9,
                   t.interconnect.intra_node_latency_us * 1e-6};
  auto bytes = [&](ValueId v) {
    const TensorType &type = p.step.graph.type(v);
    return static_cast<double>(numElements(type.shape) * dtypeSize(type.dtype));
  };
  double tp = 0, regathered = 0;
  int gathers = 0, scatters = 0, regathers = 0;
  for (const Node &node : p.step.graph.nodes()) {
    if (node.op == "TensorParallelAllGather" && node.name.starts_with("recompute.")) {
      ++regathers;
      regathered += ringAllGatherSeconds(bytes(node.outputs[0]), 2, intra);
    }
    if (node.op == "TensorParallelReduce" || node.op == "TensorParallelMax")
      tp += ringAllReduceSeconds(bytes(node.outputs[0]), 2, intra);
    if (node.op == "TensorParallelAllGather") {
      tp += ringAllGatherSeconds(bytes(node.outputs[0]), 2, intra);
      ++gathers;
    }
    if (node.op == "TensorParallelReduceScatter") {
      tp += ringReduceScatterSeconds(bytes(node.inputs[0]), 2, intra);
      ++scatters;
    }
  }
  // Each gather's gradient is a reduce-scatter and the other way round;
  // SequenceRegatherPass adds one gather in the backward per forward gather
  // the backward reads, counted like the others.
  EXPECT_GT(regathers, 0);
  EXPECT_EQ(gathers, scatters + regathers);
  // The backward's gathers again hide behind the input-gradient matmuls
  // beside them, as far as those take: each costs between nothing and a
  // whole all-gather, and the matmuls here take long enough to hide some.
  EXPECT_LT(time->tensor_parallel, tp - 1e-12);
  EXPECT_GE(time->tensor_parallel, tp - regathered - 1e-15);
}

// Two stages over four micro-batches: the busiest stage's kernels run four
// times and the span adds the fill and drain, the other stage's work once;
// one device running the same micro-batches has no bubble.
TEST_F(TinyStepTime, APipelineAddsItsBubble) {
  const target::Target &t = job_->target;
  auto pipelined = predictStepTime(program(1, 1, 0, 2, 4), t);
  auto accumulated = predictStepTime(program(1, 1, 0, 1, 4), t);
  ASSERT_TRUE(pipelined) << pipelined.message();
  ASSERT_TRUE(accumulated) << accumulated.message();
  EXPECT_EQ(accumulated->pipeline, 0);
  EXPECT_GT(pipelined->pipeline, 0);
  EXPECT_LT(pipelined->kernels, accumulated->kernels) << "a stage runs part of the step";
  EXPECT_GE(pipelined->kernels + pipelined->pipeline, accumulated->kernels / 4 * 5 / 2)
      << "M x the busiest stage (at least half a step) + the other once: >= 2.5 steps' kernels";
  EXPECT_NE(pipelined->toText().find("pipeline bubble and sends"), std::string::npos);
}

TEST_F(TinyStepTime, FasterChipsRunTheKernelsFaster) {
  const TrainingProgram p = program(1, 1, 0);
  target::Target t = job_->target;
  auto slow = predictStepTime(p, t);
  ASSERT_TRUE(slow) << slow.message();
  for (auto *rates : {&t.peak_tflops, &t.vector_peak_tflops})
    for (auto &[dtype, rate] : *rates)
      rate *= 2;
  t.hbm_bandwidth_gbps *= 2;
  auto fast = predictStepTime(p, t);
  ASSERT_TRUE(fast) << fast.message();
  EXPECT_GT(slow->kernels, 0);
  EXPECT_DOUBLE_EQ(fast->kernels, slow->kernels / 2);
  EXPECT_DOUBLE_EQ(fast->update, slow->update / 2);
}

TEST_F(TinyStepTime, AGroupAcrossNodesRunsAtTheNetwork) {
  const TrainingProgram p = program(2, 1, 0);
  const target::Target &t = job_->target;
  auto one = predictStepTime(p, t, 1);
  auto two = predictStepTime(p, t, 2); // one replica a node
  ASSERT_TRUE(one && two);
  EXPECT_GT(two->data_parallel, one->data_parallel);
  EXPECT_EQ(two->kernels, one->kernels);
  EXPECT_EQ(nodesFor(t, 16), 2);
  EXPECT_EQ(nodesFor(t, 8), 1);
}

} // namespace
} // namespace kiln::parallel
