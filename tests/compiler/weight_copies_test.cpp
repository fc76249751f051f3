// The step's Casts of trained weights become reads of the weights' compute
// copies: each narrowing Cast of a weight (several of one weight share one
// copy) reads the copy instead; a weight cast to two dtypes, or one the
// caller does not name, keeps its Casts; a weight also read as it is keeps
// its input. Given copies equal to the Casts, the step computes the same
// bits.
#include "compiler/parallel/weight_copies.h"

#include <gtest/gtest.h>

#include "compiler/autodiff/training_step.h"
#include "ops/interpreter.h"
#include "ops/op_builder.h"
#include "tests/support/codegen_test_util.h"

namespace kiln::parallel {
namespace {

struct Step {
  Graph graph{"step"};
  ops::TensorMap feed;
};

// w [4, 3] cast twice to bf16 for a MatMul and an Add; v [3] cast to bf16
// and read in f32 too; u [3] cast to bf16 and f16; f [3] frozen, cast.
Step step() {
  Step s;
  Graph &g = s.graph;
  const ValueId x = g.addInput("x", {DType::BF16, {2, 4}}, InputRole::Data);
  const ValueId w = g.addInput("w", {DType::F32, {4, 3}}, InputRole::Parameter);
  const ValueId v = g.addInput("v", {DType::F32, {3}}, InputRole::Parameter);
  const ValueId u = g.addInput("u", {DType::F32, {3}}, InputRole::Parameter);
  const ValueId f = g.addInput("f", {DType::F32, {3}}, InputRole::Frozen);
  ops::OpBuilder b(g);
  auto cast = [&](ValueId in, DType to, const char *name) {
    return b.create("Cast", name, {in}, {{"dtype", to}});
  };
  const ValueId y = b.create("MatMul", "y", {x, cast(w, DType::BF16, "w.first")});
  const ValueId w2 = cast(w, DType::BF16, "w.second");
  const ValueId row = b.create("ReduceSum", "w.rows", {w2}, {{"axes", std::vector<int64_t>{0}}});
  const ValueId sum = b.create("Add", "sum", {y, cast(v, DType::BF16, "v.bf16")});
  const ValueId with_row = b.create("Add", "with_row", {sum, row});
  const ValueId with_u = b.create("Add", "with_u", {with_row, cast(u, DType::BF16, "u.bf16")});
  g.addOutput("out", b.create("Add", "with_f", {with_u, cast(f, DType::BF16, "f.bf16")}));
  g.addOutput("v_squared", b.create("Mul", "v_squared", {v, v}));
  g.addOutput("u_half", cast(u, DType::F16, "u.f16"));
  EXPECT_TRUE(b.status()) << b.status().message();
  s.feed = testing::randomInputs(g, 7, -2.0f, 2.0f);
  return s;
}

int castsOf(const Graph &g, const std::string &input) {
  const ValueId in = g.findInput(input)->value;
  int casts = 0;
  for (const Node &n : g.nodes())
    if (n.op == "Cast" && n.inputs[0] == in)
      ++casts;
  return casts;
}

TEST(WeightCopies, TheStepReadsCopiesForItsCastsOfTrainedWeights) {
  Step s = step();
  Graph rewritten = s.graph;
  const std::map<std::string, DType> copies = readWeightCopies(rewritten, {"w", "v", "u"});
  ASSERT_TRUE(rewritten.compact());
  EXPECT_EQ(copies, (std::map<std::string, DType>{{"w", DType::BF16}, {"v", DType::BF16}}))
      << "u is cast to two dtypes; f is not named";
  for (const char *w : {"w", "v"}) {
    const GraphInput *copy = rewritten.findInput(autodiff::weightCopyName(w));
    ASSERT_NE(copy, nullptr) << w;
    EXPECT_EQ(copy->role, InputRole::WeightCopy);
    EXPECT_EQ(rewritten.type(copy->value),
              (TensorType{DType::BF16, s.graph.type(s.graph.findInput(w)->value).shape}));
    EXPECT_EQ(castsOf(rewritten, w), 0) << w;
  }
  EXPECT_NE(rewritten.findInput("v"), nullptr) << "v is read in f32 too";
  EXPECT_EQ(castsOf(rewritten, "u"), 2);
  EXPECT_EQ(castsOf(rewritten, "f"), 1);
  EXPECT_EQ(rewritten.findInput(autodiff::weightCopyName("u")), nullptr);

  // Copies that are the Casts give the same bits.
  ops::TensorMap feed = s.feed;
  for (const auto &[name, dtype] : copies)
    feed[autodiff::weightCopyName(name)] = s.feed.at(name).castTo(dtype);
  auto want = ops::interpret(s.graph, s.feed);
  auto got = ops::interpret(rewritten, feed);
  ASSERT_TRUE(want) << want.message();
  ASSERT_TRUE(got) << got.message();
  for (const auto &[name, t] : *want)
    EXPECT_TRUE(got->at(name) == t) << name;
}

} // namespace
} // namespace kiln::parallel
