// The UB budget model of fused vector kernels: which values count as inputs,
// outputs and intermediates, what a buffer costs, and when a group fits.
#include <gtest/gtest.h>

#include "ops/op_builder.h"
#include "passes/fusion/ub_budget.h"
#include "target/target.h"
#include "tests/support/op_test_util.h"

namespace kiln::passes {
namespace {

target::Target loadOrFail(const std::string &name) {
  auto t = target::loadTarget(name);
  EXPECT_TRUE(t) << t.message();
  return t ? *t : target::Target{};
}

TEST(UbBudget, CountsInputsOutputsAndIntermediatesOnce) {
  // x -> a=Neg -> b=Exp -> c=Mul(b, x) -> y; a is also read by an outside Reshape.
  Graph g("t");
  ValueId x = g.addInput("x", TensorType{DType::F16, {64, 64}}, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId a = b.create("Neg", "a", {x});
  ValueId e = b.create("Exp", "b", {a});
  ValueId c = b.create("Mul", "c", {e, x});
  ValueId r = b.create("Reshape", "r", {a}, {{"shape", std::vector<int64_t>{4096}}});
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  g.addOutput("y", c);
  g.addOutput("r", r);
  FusionView view(g);
  const std::vector<NodeId> members{g.findNode("a"), g.findNode("b"), g.findNode("c")};
  const int64_t tile = 1024;
  UbUsage u = ubUsage(view, members, tile);
  EXPECT_EQ(u.inputs, 1);          // x, read twice
  EXPECT_EQ(u.outputs, 2);         // a (read by the Reshape) and c (a graph output)
  EXPECT_EQ(u.intermediates, 1);   // b
  const int64_t buffer = tile * 2; // f16
  EXPECT_EQ(u.bytes, (2 * 1 + 2 * 2 + 1) * buffer);
}

TEST(UbBudget, SmallValuesCostWhatTheyHold) {
  // A scalar and a [8] row weight broadcast over [64,8] rows.
  Graph g("t");
  ValueId x = g.addInput("x", TensorType{DType::F32, {64, 8}}, InputRole::Data);
  ValueId s = g.addInput("s", TensorType{DType::F32, {}}, InputRole::Data);
  ValueId w = g.addInput("w", TensorType{DType::F32, {8}}, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId m = b.create("Mul", "m", {x, s});
  ValueId y = b.create("Mul", "y", {m, w});
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  g.addOutput("y", y);
  FusionView view(g);
  UbUsage u = ubUsage(view, {g.findNode("m"), g.findNode("y")}, 4096);
  EXPECT_EQ(u.inputs, 3);
  EXPECT_EQ(u.outputs, 1);
  EXPECT_EQ(u.intermediates, 1);
  const int64_t rows = 64 * 8 * 4; // the whole [64,8] f32 tensor is under one tile
  EXPECT_EQ(u.bytes, 2 * rows + 2 * 4 + 2 * 8 * 4 + 2 * rows + rows);
}

TEST(UbBudget, FitsUpToTheTargetsUbAndSaysWhyNot) {
  target::Target t = loadOrFail("ascend910b");
  UbUsage fits;
  fits.bytes = t.memory.ub_bytes;
  EXPECT_EQ(checkUbBudget(fits, t).reason(), "");
  UbUsage over{t.memory.ub_bytes + 1, 1, 2, 3};
  std::string why = checkUbBudget(over, t).reason();
  EXPECT_TRUE(kiln::testing::mentions(
      why,
      {"needs " + std::to_string(t.memory.ub_bytes + 1) + " bytes of UB", "1 inputs", "2 outputs",
       "3 intermediates", std::to_string(t.memory.ub_bytes) + " bytes of ascend910b",
       "tiles of " + std::to_string(t.vector_tile_elements)}));
}

} // namespace
} // namespace kiln::passes
