// The executor's arena: a run writes every value into one block laid out by
// the graph's memory plan, reads its inputs where the caller holds them, and
// a device counts exactly the arena and the inputs it does not hold. A
// block comes back once no output points into it.
#include <algorithm>
#include <cstring>

#include <gtest/gtest.h>

#include "compiler/codegen/kernel_compiler.h"
#include "ops/interpreter.h"
#include "ops/op_builder.h"
#include "runtime/executor.h"
#include "target/target.h"
#include "tests/support/codegen_test_util.h"
#include "tests/support/random.h"

namespace kiln {
namespace {

// y = -(n * n), n = -(w * x) through a reshape view, and w * x itself:
// values that die early (their bytes reused), a view, two outputs, every
// op exact in f32, so the interpreter gives the same bits.
Graph viewAndReuse() {
  Graph g("arena");
  const TensorType t{DType::F32, {8, 64}};
  ValueId x = g.addInput("x", t, InputRole::Data);
  ValueId w = g.addInput("w", t, InputRole::Parameter);
  ops::OpBuilder b(g);
  ValueId wx = b.create("Mul", "wx", {w, x});
  ValueId flat = b.create("Reshape", "flat", {wx}, {{"shape", std::vector<int64_t>{512}}});
  ValueId n = b.create("Neg", "n", {flat});
  ValueId e = b.create("Mul", "e", {n, n});
  ValueId y = b.create("Neg", "y", {e});
  EXPECT_TRUE(b.status()) << b.status().message();
  g.addOutput("y", y);
  g.addOutput("wx", wx);
  return g;
}

TEST(ExecutorArena, ARunIsItsPlanToTheByteAndGivesTheInterpretersBits) {
  const Graph g = viewAndReuse();
  std::unique_ptr<runtime::Executor> executor = testing::compiledExecutor(g);
  ASSERT_TRUE(executor);
  const executable::MemoryPlan &plan = executor->memoryPlan();
  ASSERT_TRUE(executable::verifyMemoryPlan(plan));
  for (const executable::BufferPlacement &b : plan.buffers)
    EXPECT_TRUE(b.value != "x" && b.value != "w") << "inputs stay where the caller holds them";
  EXPECT_LT(plan.peak_bytes, plan.total_bytes) << "dead values' bytes are reused";

  const ops::TensorMap inputs{{"x", testing::randomTensor({DType::F32, {8, 64}}, 1, -1, 1)},
                              {"w", testing::randomTensor({DType::F32, {8, 64}}, 2, -1, 1)}};
  // The device holds the weight already; the run counts the rest.
  runtime::DeviceMemory memory("npu:0", int64_t{1} << 30);
  ASSERT_TRUE(memory.allocate("w", 2048));
  auto got = executor->run(inputs, &memory);
  ASSERT_TRUE(got) << got.message();
  EXPECT_EQ(memory.peak(), 2048 + plan.peak_bytes + 2048) << "w, the arena and x";
  EXPECT_EQ(memory.live(), 2048) << "the run released all it counted";
  auto want = ops::interpret(g, inputs);
  ASSERT_TRUE(want) << want.message();
  EXPECT_EQ(got->at("y"), want->at("y"));
  EXPECT_EQ(got->at("wx"), want->at("wx"));
}

// A received input (a token batch, a pipeline transfer) is copied into the
// arena and its bytes are reused after its last reader: the device counts
// the arena alone beside what it holds.
TEST(ExecutorArena, AReceivedInputLiesInTheArena) {
  const Graph g = viewAndReuse();
  auto target = target::loadTarget("ascend910b");
  ASSERT_TRUE(target) << target.message();
  auto kernels = codegen::compileKernels(g, *target, {});
  ASSERT_TRUE(kernels) << kernels.message();
  runtime::ExecutorOptions options;
  options.input_in_place = [](const GraphInput &in) { return in.name != "x"; };
  auto executor = runtime::Executor::create(g, std::move(*kernels), options);
  ASSERT_TRUE(executor) << executor.message();
  const executable::MemoryPlan &plan = (*executor)->memoryPlan();
  ASSERT_TRUE(std::any_of(plan.buffers.begin(), plan.buffers.end(),
                          [](const executable::BufferPlacement &b) { return b.value == "x"; }));
  const ops::TensorMap inputs{{"x", testing::randomTensor({DType::F32, {8, 64}}, 5, -1, 1)},
                              {"w", testing::randomTensor({DType::F32, {8, 64}}, 6, -1, 1)}};
  runtime::DeviceMemory memory("npu:0", int64_t{1} << 30);
  ASSERT_TRUE(memory.allocate("w", 2048));
  auto got = (*executor)->run(inputs, &memory);
  ASSERT_TRUE(got) << got.message();
  EXPECT_EQ(memory.peak(), 2048 + plan.peak_bytes) << "w and the arena";
  auto want = ops::interpret(g, inputs);
  ASSERT_TRUE(want) << want.message();
  EXPECT_EQ(got->at("y"), want->at("y"));
  EXPECT_EQ(inputs.at("x"), testing::randomTensor({DType::F32, {8, 64}}, 5, -1, 1))
      << "the caller's input is left as it was";
}

TEST(ExecutorArena, AnArenaIsReusedOnceNoOutputPointsIntoIt) {
  const Graph g = viewAndReuse();
  std::unique_ptr<runtime::Executor> executor = testing::compiledExecutor(g);
  ASSERT_TRUE(executor);
  const ops::TensorMap inputs{{"x", testing::randomTensor({DType::F32, {8, 64}}, 3, -1, 1)},
                              {"w", testing::randomTensor({DType::F32, {8, 64}}, 4, -1, 1)}};
  const int64_t arena = executor->memoryPlan().peak_bytes;
  auto first = executor->run(inputs);
  ASSERT_TRUE(first) << first.message();
  EXPECT_EQ(executor->arenaBytesAllocated(), arena);
  // The first run's outputs are still held: the next run takes a new arena
  // and leaves them as they were.
  const Tensor y = first->at("y").copy();
  auto second = executor->run(inputs);
  ASSERT_TRUE(second) << second.message();
  EXPECT_EQ(executor->arenaBytesAllocated(), 2 * arena);
  EXPECT_EQ(first->at("y"), y);
  EXPECT_EQ(second->at("y"), y);
  // Dropped, their arenas come back: no new allocation.
  first->clear();
  second->clear();
  const uint64_t allocated = Tensor::bytesAllocated();
  auto third = executor->run(inputs);
  ASSERT_TRUE(third) << third.message();
  EXPECT_EQ(executor->arenaBytesAllocated(), 2 * arena);
  EXPECT_EQ(Tensor::bytesAllocated(), allocated) << "every value lies in the arena";
  EXPECT_EQ(third->at("y"), y);
  // An output outlives its executor.
  executor.reset();
  EXPECT_EQ(third->at("y"), y);
}

} // namespace
} // namespace kiln
