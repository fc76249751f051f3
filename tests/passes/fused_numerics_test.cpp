// The interpreter runs an F32 fusion group as one kernel: intermediates stay
// in f32, only the group's outputs are rounded, explicit Casts still round.
#include <cmath>

#include <gtest/gtest.h>

#include "formats/graph_json.h"
#include "ops/interpreter.h"
#include "ops/op_builder.h"

namespace kiln {
namespace {

TEST(FusedNumerics, F32GroupRoundsOnlyItsOutputs) {
  // x * 300 * 300 / 1000 in f16: unfused, x*300*300 = 90000 overflows f16.
  Graph g("t");
  ValueId x = g.addInput("x", TensorType{DType::F16, {1}}, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId k = b.constant(300.0, DType::F16, "k", {1});
  ValueId m1 = b.create("Mul", "m1", {x, k});
  ValueId m2 = b.create("Mul", "m2", {m1, k});
  ValueId d = b.create("Div", "d", {m2, b.constant(1000.0, DType::F16, "thousand", {1})});
  g.addOutput("y", d);
  ops::TensorMap feed{{"x", Tensor::fromFloats(DType::F16, {1}, {1.0f})}};

  auto unfused = ops::interpret(g, feed);
  ASSERT_TRUE(unfused) << unfused.message();
  EXPECT_TRUE(std::isinf(unfused->at("y").getFloat(0)));

  Graph fused = g;
  GroupId grp = fused.addGroup(FusionGroup{"fused.m1", "eltwise", "test", Intermediates::F32});
  for (const char *n : {"m1", "m2", "d"})
    fused.node(fused.findNode(n)).group = grp;
  ASSERT_TRUE(fused.compact().isOk());
  auto out = ops::interpret(fused, feed);
  ASSERT_TRUE(out) << out.message();
  EXPECT_FLOAT_EQ(out->at("y").getFloat(0), 90.0f);

  // Without fused numerics, or with Storage intermediates, it overflows as unfused.
  ops::InterpretOptions plain;
  plain.fused_numerics = false;
  auto again = ops::interpret(fused, feed, plain);
  ASSERT_TRUE(again) << again.message();
  EXPECT_TRUE(std::isinf(again->at("y").getFloat(0)));
  Graph storage = fused;
  ASSERT_EQ(storage.groups().size(), 1u);
  auto j = graphToJson(storage);
  j["groups"][0]["intermediates"] = "storage";
  auto parsed = graphFromJson(j, "mem");
  ASSERT_TRUE(parsed) << parsed.message();
  auto stored = ops::interpret(*parsed, feed);
  ASSERT_TRUE(stored) << stored.message();
  EXPECT_TRUE(std::isinf(stored->at("y").getFloat(0)));
}

TEST(FusedNumerics, CastInsideAGroupStillRounds) {
  Graph g("t");
  ValueId x = g.addInput("x", TensorType{DType::F32, {1}}, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId h = b.create("Cast", "to16", {x}, {{"dtype", DType::F16}});
  ValueId back = b.create("Cast", "to32", {h}, {{"dtype", DType::F32}});
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  g.addOutput("y", back);
  GroupId grp = g.addGroup(FusionGroup{"fused.to16", "eltwise", "test", Intermediates::F32});
  for (const char *n : {"to16", "to32"})
    g.node(g.findNode(n)).group = grp;
  ASSERT_TRUE(g.compact().isOk());
  auto out = ops::interpret(g, {{"x", Tensor::fromFloats(DType::F32, {1}, {1.0001f})}});
  ASSERT_TRUE(out) << out.message();
  EXPECT_EQ(out->at("y").getFloat(0), 1.0f);
}

} // namespace
} // namespace kiln
