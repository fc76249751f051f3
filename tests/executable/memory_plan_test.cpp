// The memory plan: no two buffers live together share a byte, the arena is
// no larger than a buffer per value, and a chain of values reuses memory.
#include <algorithm>

#include <gtest/gtest.h>

#include "compiler/codegen/kernel_spec.h"
#include "compiler/driver/compile.h"
#include "compiler/driver/job.h"
#include "executable/memory_plan.h"

namespace kiln::executable {
namespace {

const std::string kTiny = std::string(KILN_SOURCE_DIR) + "/examples/qwen-tiny/config.json";

// No two buffers live at the same time share a byte, checked pair by pair
// (independently of verifyMemoryPlan's sweep).
void expectNoLiveOverlap(const MemoryPlan &plan) {
  for (size_t i = 0; i < plan.buffers.size(); ++i)
    for (size_t j = i + 1; j < plan.buffers.size(); ++j) {
      const BufferPlacement &a = plan.buffers[i], &b = plan.buffers[j];
      if (!a.liveWith(b) || a.bytes == 0 || b.bytes == 0)
        continue;
      const bool disjoint = a.offset + a.bytes <= b.offset || b.offset + b.bytes <= a.offset;
      ASSERT_TRUE(disjoint) << a.value << " [" << a.offset << ", +" << a.bytes << ") and "
                            << b.value << " [" << b.offset << ", +" << b.bytes << ")";
    }
}

// x -> n0 -> n1 -> ... -> n{len-1}, every value f32[16].
Graph chain(int len) {
  Graph g("chain");
  const TensorType t{DType::F32, {16}};
  ValueId v = g.addInput("x", t, InputRole::Data);
  for (int i = 0; i < len; ++i)
    v = g.node(g.addNode("Neg", "n" + std::to_string(i), {v}, {t})).outputs[0];
  g.addOutput("y", v);
  return g;
}

TEST(ArtifactMemoryPlan, AChainReusesTwoBuffers) {
  Graph g = chain(10);
  const std::vector<codegen::KernelSpec> kernels = codegen::partitionKernels(g);
  ASSERT_EQ(kernels.size(), 10u);
  MemoryPlan plan = planMemory(g, kernels);
  ASSERT_EQ(plan.buffers.size(), 11u); // x and the ten results
  // Each kernel reads one buffer and writes another; nothing else is live.
  EXPECT_EQ(plan.peak_bytes, 2 * 64);
  EXPECT_EQ(plan.total_bytes, 11 * 64);
  EXPECT_TRUE(verifyMemoryPlan(plan));
  expectNoLiveOverlap(plan);
  const BufferPlacement &x = plan.buffers.front();
  EXPECT_EQ(x.value, "x");
  EXPECT_EQ(x.first, -1); // a graph input lives from the start
  EXPECT_EQ(x.last, 0);
  EXPECT_EQ(plan.buffers.back().last, 10); // a graph output lives to the end
}

// The trainer's lifetimes: a weight it keeps stays to the end; an output
// that leaves as it is made (a ZeRO-2 gradient) lives to its last reader.
TEST(ArtifactMemoryPlan, KeptInputsStayAndLeavingOutputsGo) {
  Graph g("grads");
  const TensorType t{DType::F32, {16}}; // 64 bytes
  ValueId w = g.addInput("w", t, InputRole::Parameter);
  ValueId d = g.node(g.addNode("Neg", "grad_w", {w}, {t})).outputs[0];
  ValueId e = g.node(g.addNode("Neg", "e", {w}, {t})).outputs[0];
  ValueId f = g.node(g.addNode("Neg", "f", {e}, {t})).outputs[0];
  g.addOutput("grad.w", d);
  g.addOutput("f", f);
  const std::vector<codegen::KernelSpec> kernels = codegen::partitionKernels(g);
  auto lifetimeOf = [](const MemoryPlan &plan, const std::string &value) {
    for (const BufferPlacement &b : plan.buffers)
      if (b.value == value)
        return std::make_pair(b.first, b.last);
    return std::make_pair(-2, -2);
  };
  const MemoryPlan plain = planMemory(g, kernels);
  EXPECT_EQ(lifetimeOf(plain, "w"), std::make_pair(-1, 1)); // to its last reader
  EXPECT_EQ(lifetimeOf(plain, "grad_w"), std::make_pair(0, 3));
  Lifetimes trainer;
  trainer.input_stays = [](const GraphInput &in) { return in.role == InputRole::Parameter; };
  trainer.output_leaves = [](const GraphOutput &out) { return out.name == "grad.w"; };
  const MemoryPlan planned = planMemory(g, kernels, kDefaultBufferAlignment, trainer);
  EXPECT_EQ(lifetimeOf(planned, "w"), std::make_pair(-1, 3));
  EXPECT_EQ(lifetimeOf(planned, "grad_w"), std::make_pair(0, 0)); // nothing reads it after
  EXPECT_EQ(lifetimeOf(planned, "f"), std::make_pair(2, 3));
  EXPECT_TRUE(verifyMemoryPlan(planned));
}

// A reshape view's output is its input's bytes: no buffer of its own, and
// the input's lives as long as the view is read. Inputs the caller keeps
// (input_outside) are not planned.
TEST(ArtifactMemoryPlan, AReshapeViewKeepsItsInputsBufferAndInputsCanStayOutside) {
  Graph g("view");
  const TensorType t{DType::F32, {4, 4}}; // 64 bytes
  ValueId x = g.addInput("x", t, InputRole::Data);
  ValueId a = g.node(g.addNode("Neg", "a", {x}, {t})).outputs[0];
  Node &reshape = g.node(g.addNode("Reshape", "r", {a}, {{DType::F32, {16}}}));
  reshape.attrs.set("shape", std::vector<int64_t>{16});
  const ValueId r = reshape.outputs[0];
  ValueId b = g.node(g.addNode("Neg", "b", {x}, {t})).outputs[0];
  ValueId c = g.node(g.addNode("Neg", "c", {r}, {{DType::F32, {16}}})).outputs[0];
  g.addOutput("b", b);
  g.addOutput("c", c);
  const std::vector<codegen::KernelSpec> kernels = codegen::partitionKernels(g);
  ASSERT_EQ(kernels.size(), 4u);
  ASSERT_TRUE(aliasesItsInput(g, kernels[1]));
  Lifetimes outside;
  outside.input_outside = [](const GraphInput &) { return true; };
  const MemoryPlan plan = planMemory(g, kernels, kDefaultBufferAlignment, outside);
  EXPECT_TRUE(verifyMemoryPlan(plan));
  expectNoLiveOverlap(plan);
  std::vector<std::string> names;
  for (const BufferPlacement &p : plan.buffers)
    names.push_back(p.value);
  // Neither x (outside) nor the view: a, b and c.
  EXPECT_EQ(names, (std::vector<std::string>{g.valueName(a), g.valueName(b), g.valueName(c)}));
  EXPECT_EQ(plan.buffers[0].first, 0);
  EXPECT_EQ(plan.buffers[0].last, 3); // read through the view by c
  EXPECT_EQ(plan.peak_bytes, 3 * 64); // a, b and c live together at c
}

TEST(ArtifactMemoryPlan, InputsAndOutputsStayLive) {
  // y = n1(n0(x)) and z = n0's result is also an output: it must not be reused.
  Graph g("two_outputs");
  const TensorType t{DType::F16, {100}}; // 200 bytes, 256 aligned
  ValueId x = g.addInput("x", t, InputRole::Data);
  ValueId a = g.node(g.addNode("Neg", "a", {x}, {t})).outputs[0];
  ValueId b = g.node(g.addNode("Neg", "b", {a}, {t})).outputs[0];
  ValueId c = g.node(g.addNode("Neg", "c", {b}, {t})).outputs[0];
  g.addOutput("a", a);
  g.addOutput("c", c);
  MemoryPlan plan = planMemory(g, codegen::partitionKernels(g));
  EXPECT_TRUE(verifyMemoryPlan(plan));
  expectNoLiveOverlap(plan);
  auto find = [&](const std::string &name) {
    return *std::find_if(plan.buffers.begin(), plan.buffers.end(),
                         [&](const BufferPlacement &p) { return p.value == name; });
  };
  EXPECT_EQ(find("a").last, 3);
  EXPECT_EQ(find("a").bytes, 200);
  // x dies at kernel 0, b at kernel 2: c reuses one of them; a holds its own.
  EXPECT_EQ(plan.peak_bytes, 3 * 256);
  EXPECT_LE(plan.peak_bytes, plan.total_bytes);
}

TEST(ArtifactMemoryPlan, TinyTrainingStepHasNoLiveOverlapAndReuses) {
  driver::JobSettings flags;
  flags.source = "test";
  auto job = driver::resolveJob(std::nullopt, flags, DType::F16);
  ASSERT_TRUE(job) << job.message();
  auto graph = driver::buildModelGraph({kTiny, /*training=*/true, 2, 8}, *job);
  ASSERT_TRUE(graph) << graph.message();
  ASSERT_TRUE(driver::compileGraph(*graph, *job));
  MemoryPlan plan = planMemory(*graph, codegen::partitionKernels(*graph));
  EXPECT_TRUE(verifyMemoryPlan(plan)) << verifyMemoryPlan(plan).message();
  expectNoLiveOverlap(plan);
  EXPECT_LT(plan.peak_bytes, plan.total_bytes);
  for (const BufferPlacement &p : plan.buffers)
    EXPECT_EQ(p.offset % plan.alignment, 0) << p.value;
  auto back = memoryPlanFromJson(memoryPlanToJson(plan), "plan");
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(memoryPlanToJson(*back), memoryPlanToJson(plan));
}

TEST(ArtifactMemoryPlan, VerifyNamesOverlappingBuffers) {
  Graph g = chain(3);
  MemoryPlan plan = planMemory(g, codegen::partitionKernels(g));
  // n0 and n1 are live together at kernel 1: put them on the same bytes.
  plan.buffers[2].offset = plan.buffers[1].offset;
  Status s = verifyMemoryPlan(plan);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("live together and overlap"), std::string::npos) << s.message();
  plan = planMemory(g, codegen::partitionKernels(g));
  plan.peak_bytes -= 64;
  EXPECT_FALSE(verifyMemoryPlan(plan));
}

} // namespace
} // namespace kiln::executable
