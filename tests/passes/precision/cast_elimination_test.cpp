// CastEliminationPass: identity casts and exact pairs go, rounding pairs stay.
#include <gtest/gtest.h>

#include "ops/op_builder.h"
#include "tests/support/pass_test_util.h"

namespace kiln::testing {
namespace {

const char *kPass = "CastEliminationPass";

TEST(CastElimination, ExactPairsCollapseAndRoundingPairsStay) {
  Graph g("t");
  ValueId x16 = g.addInput("x16", TensorType{DType::F16, {4}}, InputRole::Data);
  ValueId x32 = g.addInput("x32", TensorType{DType::F32, {4}}, InputRole::Data);
  ops::OpBuilder b(g);
  // f16 -> f32 -> f16 is exact: the pair goes and y reads x16.
  ValueId up = b.create("Cast", "up", {x16}, {{"dtype", DType::F32}});
  ValueId back = b.create("Cast", "back", {up}, {{"dtype", DType::F16}});
  g.addOutput("y", b.create("Neg", "neg_y", {back}));
  // f32 -> f16 -> f32 rounds: it stays.
  ValueId down = b.create("Cast", "down", {x32}, {{"dtype", DType::F16}});
  ValueId again = b.create("Cast", "again", {down}, {{"dtype", DType::F32}});
  g.addOutput("z", b.create("Neg", "neg_z", {again}));
  // f32 -> f32 is an identity.
  ValueId same = b.create("Cast", "same", {x32}, {{"dtype", DType::F32}});
  g.addOutput("w", b.create("Neg", "neg_w", {same}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  const Graph before = g;

  passes::PassResult r = runOnePass(g, kPass);
  EXPECT_EQ(g.findNode("up"), kNoNode);
  EXPECT_EQ(g.findNode("back"), kNoNode);
  EXPECT_EQ(g.findNode("same"), kNoNode);
  EXPECT_NE(g.findNode("down"), kNoNode);
  EXPECT_NE(g.findNode("again"), kNoNode);
  EXPECT_EQ(r.effect_times, 3);
  EXPECT_NE(reasonFor(r, "again").find("narrows"), std::string::npos) << reasonFor(r, "again");

  ops::TensorMap feed{{"x16", Tensor::fromFloats(DType::F16, {4}, {1.5f, -2, 3, 65504})},
                      {"x32", Tensor::fromFloats(DType::F32, {4}, {1.0001f, -2, 3e5f, 4})}};
  auto want = ops::interpret(before, feed), got = ops::interpret(g, feed);
  ASSERT_TRUE(want && got);
  EXPECT_TRUE(outputsAgree(*want, *got, 0, 0));
}

TEST(CastElimination, SwitchedOffKeepsEveryCast) {
  Graph g("t");
  ValueId x = g.addInput("x", TensorType{DType::F32, {2}}, InputRole::Data);
  ops::OpBuilder b(g);
  g.addOutput("y", b.create("Cast", "same", {x}, {{"dtype", DType::F32}}));
  runPasses(g, contextFor("ascend910b", {switchPasses({{kPass, false}})}));
  EXPECT_NE(g.findNode("same"), kNoNode);
}

} // namespace
} // namespace kiln::testing
