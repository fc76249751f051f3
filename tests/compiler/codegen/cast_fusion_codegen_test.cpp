// CastBeforeReshapePass and CastFusionPass: each lone Cast joins the kernel
// that makes its input (an epilogue, a pair with a Transpose) or the
// reduction that reads it (a prologue), the Cast
// after a Reshape moves above it, and the compiled results are the same
// bits as with both passes off, and match the interpreter.
#include <gtest/gtest.h>

#include "ops/op_builder.h"
#include "tests/support/codegen_test_util.h"
#include "tests/support/pass_test_util.h"

namespace kiln::testing {
namespace {

using Names = std::vector<std::string>;

Graph castGraph() {
  Graph g("casts");
  const ValueId x = g.addInput("x", TensorType{DType::F32, {4, 8, 16}}, InputRole::Data);
  ops::OpBuilder b(g);
  // pair: a lone Transpose and its cast.
  const ValueId t = b.create("Transpose", "t", {x}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  g.addOutput("pair", b.create("Cast", "t.to_bf16", {t}, {{"dtype", DType::BF16}}));
  // epilogue: a softmax kernel whose result only the cast reads.
  const ValueId scale = b.constant(0.125, DType::F32, "scale");
  const ValueId s =
      b.create("Softmax", "sm", {b.create("Mul", "scaled", {x, scale})}, {{"axis", int64_t{-1}}});
  g.addOutput("epilogue", b.create("Cast", "sm.to_bf16", {s}, {{"dtype", DType::BF16}}));
  // swap: Cast(Reshape(y)) becomes Reshape(Cast(y)), and the cast fuses with y's kernel.
  const ValueId y = b.create("Exp", "exp", {b.create("Neg", "neg", {x})});
  const ValueId r = b.create("Reshape", "flat", {y}, {{"shape", std::vector<int64_t>{32, 16}}});
  g.addOutput("swap", b.create("Cast", "flat.to_bf16", {r}, {{"dtype", DType::BF16}}));
  // prologue: a bias gradient, the sum over tokens of a bf16 gradient that
  // another kernel reads too.
  const ValueId dy = g.addInput("dy", TensorType{DType::BF16, {64, 24}}, InputRole::Data);
  g.addOutput("dy_neg", b.create("Neg", "dy.neg", {dy}));
  const ValueId wide = b.create("Cast", "dy.to_f32", {dy}, {{"dtype", DType::F32}});
  g.addOutput("dbias",
              b.create("SumToShape", "dbias", {wide}, {{"shape", std::vector<int64_t>{24}}}));
  EXPECT_TRUE(b.status().isOk()) << b.status().message();
  return g;
}

TEST(CastFusion, LoneCastsJoinTheKernelsBesideThem) {
  Graph g = castGraph();
  runPasses(g, contextFor("ascend910b"));
  EXPECT_EQ(groupMemberNames(g, "t.to_bf16"), (Names{"t", "t.to_bf16"}));
  EXPECT_EQ(g.group(g.node(g.findNode("t")).group).kernel, "transpose_cast");
  EXPECT_EQ(groupMemberNames(g, "sm.to_bf16"), (Names{"scale", "scaled", "sm", "sm.to_bf16"}));
  EXPECT_EQ(groupMemberNames(g, "flat.to_bf16"), (Names{"neg", "exp", "flat.to_bf16"}));
  EXPECT_EQ(groupMemberNames(g, "dbias"), (Names{"dy.to_f32", "dbias"}));
  EXPECT_EQ(g.group(g.node(g.findNode("dbias")).group).kernel, "cast_sumtoshape");
  const Node &flat = g.node(g.findNode("flat"));
  EXPECT_EQ(g.type(flat.inputs[0]).dtype, DType::BF16) << "the reshape reads the cast now";
}

TEST(CastFusion, SameBitsAsWithoutTheFoldAndTheInterpreter) {
  Graph folded = castGraph(), plain = castGraph();
  runPasses(folded, contextFor("ascend910b"));
  runPasses(plain, contextFor("ascend910b", {switchPasses({{"CastFusionPass", false},
                                                           {"CastBeforeReshapePass", false}})}));
  EXPECT_EQ(plain.node(plain.findNode("t.to_bf16")).group, kNoGroup);
  EXPECT_EQ(plain.node(plain.findNode("dy.to_f32")).group, kNoGroup);
  for (OverflowMode mode : {OverflowMode::InfNan, OverflowMode::Saturation}) {
    ops::TensorMap feed = randomInputs(folded, 7, -300.0f, 300.0f);
    feed["x"].dataAs<float>()[5] = 3.0e38f; // past bf16's range: the casts round it
    CompareOptions options;
    options.overflow = mode;
    const ops::TensorMap a = expectCompiledMatchesReference(folded, feed, options);
    const ops::TensorMap b = expectCompiledMatchesReference(plain, feed, options);
    for (const auto &[name, t] : b) {
      ASSERT_TRUE(a.count(name)) << name;
      EXPECT_TRUE(a.at(name) == t) << name << ": the folded casts changed bits";
    }
  }
}

TEST(CastFusion, ACastWhoseValueHasOtherReadersStaysAlone) {
  Graph g("t");
  const ValueId x = g.addInput("x", TensorType{DType::F32, {8, 16}}, InputRole::Data);
  ops::OpBuilder b(g);
  const ValueId t = b.create("Transpose", "t", {x}, {{"perm", std::vector<int64_t>{1, 0}}});
  g.addOutput("c", b.create("Cast", "t.to_bf16", {t}, {{"dtype", DType::BF16}}));
  g.addOutput("t", t);
  ASSERT_TRUE(b.status().isOk());
  passes::PassResult r = runOnePass(g, "CastFusionPass");
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_NE(reasonFor(r, "t.to_bf16").find("no kernel beside it"), std::string::npos);
}

} // namespace
} // namespace kiln::testing
