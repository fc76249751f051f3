// ConstantFoldingPass: splat arithmetic and data movement fold into Fills
// whose values are what the reference interpreter computes; ops that do not
// keep a splat a splat, mode-dependent results and unrepresentable values
// are rejected with a reason.
#include <cmath>

#include <gtest/gtest.h>

#include "ops/op_builder.h"
#include "passes/cleanup/constant_folding.h"
#include "tests/passes/cleanup/cleanup_test_util.h"

namespace kiln::testing {
namespace {

using Ints = std::vector<int64_t>;
const char *kPass = "ConstantFoldingPass";

const Node &nodeNamed(const Graph &g, const std::string &name) {
  NodeId id = g.findNode(name);
  EXPECT_NE(id, kNoNode) << name;
  return g.node(id == kNoNode ? 0 : id);
}

bool hasRejection(const passes::PassResult &r, const std::string &node, const std::string &part) {
  for (const passes::Rejection &rej : r.rejections)
    if (rej.node == node && rej.reason.find(part) != std::string::npos)
      return true;
  return false;
}

TEST(ConstantFolding, FoldsAChainOfSplatArithmeticInPlace) {
  Graph g("t");
  ValueId x = g.addInput("x", TensorType{DType::F16, {2, 3}}, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId three = b.constant(3.0, DType::F32, "three", {2, 3});
  ValueId half = b.constant(0.5, DType::F32, "half");
  ValueId m = b.create("Mul", "m", {three, half});
  ValueId c = b.create("Cast", "c", {m}, {{"dtype", DType::F16}});
  g.addOutput("y", b.create("Add", "y", {x, c}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  const Graph before = g;

  passes::PassResult r = runOnePass(g, kPass);
  EXPECT_EQ(r.match_times, 2); // m, then c once m is a Fill; y reads x
  EXPECT_EQ(r.effect_times, 2);
  EXPECT_TRUE(r.rejections.empty());
  EXPECT_EQ(r.statistics.at("nodes_folded"), 2);

  const Node &fm = nodeNamed(g, "m");
  EXPECT_EQ(fm.op, "Fill");
  EXPECT_TRUE(fm.inputs.empty());
  EXPECT_EQ(fm.attrs.getFloat("value"), 1.5);
  EXPECT_EQ(fm.attrs.getDType("dtype"), DType::F32);
  EXPECT_EQ(fm.attrs.getInts("shape"), (Ints{2, 3}));
  EXPECT_EQ(provenanceOf(g, "m"), "ConstantFoldingPass <- m");
  const Node &fc = nodeNamed(g, "c");
  EXPECT_EQ(fc.op, "Fill");
  EXPECT_EQ(fc.attrs.getDType("dtype"), DType::F16);
  EXPECT_EQ(nodeNamed(g, "y").op, "Add");

  ops::TensorMap feed{{"x", Tensor::fromFloats(DType::F16, {2, 3}, {1, 2, 3, 4, 5, 6})}};
  EXPECT_TRUE(sameResults(before, g, feed));
}

TEST(ConstantFolding, RoundsExactlyAsTheKernel) {
  // 1/3 and sqrt(2) in f16, bf16 and f32: the folded value is the interpreter's.
  for (DType dtype : {DType::F16, DType::BF16, DType::F32}) {
    Graph g("t");
    ops::OpBuilder b(g);
    ValueId one = b.constant(1.0, dtype, "one", {4});
    ValueId third = b.create("Div", "third", {one, b.constant(3.0, dtype, "three")});
    ValueId root = b.create("Sqrt", "root", {b.constant(2.0, dtype, "two", {4})});
    g.addOutput("third", third);
    g.addOutput("root", b.create("Exp", "e", {b.create("Neg", "n", {root})}));
    ASSERT_TRUE(b.status().isOk()) << b.status().message();
    const Graph before = g;
    passes::PassResult r = runOnePass(g, kPass);
    EXPECT_EQ(r.effect_times, 4) << dtypeName(dtype); // third, root, n, e
    for (const char *name : {"third", "root", "n", "e"})
      EXPECT_EQ(nodeNamed(g, name).op, "Fill") << name;
    EXPECT_TRUE(sameResults(before, g, {})) << dtypeName(dtype);
    // Independent of the kernel: f32 1/3 rounded once to the storage type.
    float expected = Tensor::fromFloats(dtype, {1}, {1.0f / 3.0f}).getFloat(0);
    EXPECT_EQ(static_cast<float>(nodeNamed(g, "third").attrs.getFloat("value")), expected);
  }
}

TEST(ConstantFolding, ResultThatDependsOnTheOverflowModeIsNotFoldedWhereBothModesExist) {
  // 300 * 300 overflows f16: inf under INFNAN, 65504 under SATURATION.
  auto build = [] {
    Graph g("t");
    ops::OpBuilder b(g);
    ValueId k = b.constant(300.0, DType::F16, "k", {2});
    g.addOutput("y", b.create("Mul", "sq", {k, k}));
    return g;
  };
  Graph g = build();
  passes::PassResult r = runOnePass(g, kPass, "ascend910b");
  EXPECT_EQ(r.match_times, 1);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_TRUE(hasRejection(r, "sq", "overflow mode"));
  EXPECT_TRUE(hasRejection(r, "sq", "inf"));
  EXPECT_EQ(nodeNamed(g, "sq").op, "Mul");

  // ascend910 saturates only: the fold is 65504 and agrees with the interpreter.
  Graph s = build();
  const Graph before = s;
  r = runOnePass(s, kPass, "ascend910");
  EXPECT_EQ(r.effect_times, 1);
  EXPECT_EQ(nodeNamed(s, "sq").attrs.getFloat("value"), 65504.0);
  EXPECT_TRUE(sameResults(before, s, {}, OverflowMode::Saturation));
}

TEST(ConstantFolding, OpsThatDoNotKeepASplatAreRejected) {
  Graph g("t");
  ops::OpBuilder b(g);
  ValueId k = b.constant(2.0, DType::F32, "k", {2, 2, 4});
  g.addOutput("r", b.create("RotateHalf", "rot", {k}));
  g.addOutput("c", b.create("CausalMask", "mask", {k}, {{"fill", -1.0}}));
  g.addOutput("m", b.create("MatMul", "mm",
                            {b.constant(1.0, DType::F32, "a", {2, 2}),
                             b.constant(1.0, DType::F32, "bb", {2, 2})}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  const std::string text = textOf(g);
  passes::PassResult r = runOnePass(g, kPass);
  EXPECT_EQ(r.match_times, 3);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_TRUE(hasRejection(r, "rot", "negates half"));
  EXPECT_TRUE(hasRejection(r, "mask", "by position"));
  EXPECT_TRUE(hasRejection(r, "mm", "allow-list"));
  EXPECT_EQ(textOf(g), text);
  // The reason is real: RotateHalf of a splat is not a splat.
  ops::TensorMap out = interpretOk(g, {});
  EXPECT_NE(out.at("r").getFloat(0), out.at("r").getFloat(3));
}

TEST(ConstantFolding, DataMovementKeepsTheValueAndTakesTheNewShape) {
  Graph g("t");
  ops::OpBuilder b(g);
  ValueId k = b.constant(-0.25, DType::BF16, "k", {2, 3});
  ValueId rs = b.create("Reshape", "r", {k}, {{"shape", Ints{3, 2, 1}}});
  ValueId t = b.create("Transpose", "tr", {rs}, {{"perm", Ints{2, 0, 1}}});
  ValueId bc = b.create("BroadcastTo", "bc", {t}, {{"shape", Ints{4, 1, 3, 2}}});
  ValueId sl =
      b.create("Slice", "sl", {bc}, {{"begin", Ints{1, 0, 0, 0}}, {"end", Ints{3, 1, 2, 2}}});
  std::vector<ValueId> parts =
      b.createMulti("Split", "sp", {sl}, {{"axis", int64_t{0}}, {"sizes", Ints{1, 1}}});
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  ASSERT_EQ(parts.size(), 2u);
  ValueId cat = b.create("Concat", "cat", {parts[0], parts[1], parts[0]}, {{"axis", int64_t{3}}});
  g.addOutput("sl", sl);
  g.addOutput("cat", cat);
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  const Graph before = g;

  passes::PassResult r = runOnePass(g, kPass);
  EXPECT_EQ(r.effect_times, 6); // r, tr, bc, sl, sp (into two Fills), cat
  EXPECT_TRUE(r.rejections.empty());
  for (const char *name : {"r", "tr", "bc", "sl", "cat"})
    EXPECT_EQ(nodeNamed(g, name).op, "Fill") << name;
  EXPECT_EQ(nodeNamed(g, "cat").attrs.getInts("shape"), (Ints{1, 1, 2, 6}));
  EXPECT_EQ(g.findNode("sp"), kNoNode);
  for (const char *name : {"sp.0", "sp.1"}) {
    EXPECT_EQ(nodeNamed(g, name).op, "Fill") << name;
    EXPECT_EQ(provenanceOf(g, name), "ConstantFoldingPass <- sp");
  }
  EXPECT_TRUE(sameResults(before, g, {}));
}

TEST(ConstantFolding, ConcatAndPadFoldOnlyWhenTheValuesAgree) {
  Graph g("t");
  ops::OpBuilder b(g);
  ValueId one = b.constant(1.0, DType::F32, "one", {2});
  ValueId also_one = b.constant(1.0, DType::F32, "also_one", {3});
  ValueId two = b.constant(2.0, DType::F32, "two", {2});
  g.addOutput("same", b.create("Concat", "same", {one, also_one}, {{"axis", int64_t{0}}}));
  g.addOutput("diff", b.create("Concat", "diff", {one, two}, {{"axis", int64_t{0}}}));
  AttrMap pad_one{{"before", Ints{1}}, {"after", Ints{2}}, {"value", 1.0}};
  AttrMap pad_zero{{"before", Ints{0}}, {"after", Ints{1}}, {"value", 0.0}};
  AttrMap pad_none{{"before", Ints{0}}, {"after", Ints{0}}, {"value", 5.0}};
  g.addOutput("pad_one", b.create("Pad", "pad_one", {one}, pad_one));
  g.addOutput("pad_zero", b.create("Pad", "pad_zero", {one}, pad_zero));
  g.addOutput("pad_none", b.create("Pad", "pad_none", {two}, pad_none));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  const Graph before = g;

  passes::PassResult r = runOnePass(g, kPass);
  EXPECT_EQ(r.match_times, 5);
  EXPECT_EQ(r.effect_times, 3); // same, pad_one, pad_none
  EXPECT_TRUE(hasRejection(r, "diff", "different values (1.0 and 2.0)"));
  EXPECT_TRUE(hasRejection(r, "pad_zero", "pads with 0.0"));
  EXPECT_EQ(nodeNamed(g, "same").op, "Fill");
  EXPECT_EQ(nodeNamed(g, "pad_one").op, "Fill");
  EXPECT_EQ(nodeNamed(g, "pad_none").attrs.getFloat("value"), 2.0);
  EXPECT_EQ(nodeNamed(g, "diff").op, "Concat");
  EXPECT_EQ(nodeNamed(g, "pad_zero").op, "Pad");
  EXPECT_TRUE(sameResults(before, g, {}));
}

TEST(ConstantFolding, SmallReductionsFoldThroughTheKernel) {
  // 0.1 summed 1000 times in f16 storage: the kernel's accumulation decides.
  Graph g("t");
  ops::OpBuilder b(g);
  ValueId k = b.constant(0.1, DType::F16, "k", {10, 100});
  g.addOutput("sum", b.create("ReduceSum", "sum", {k}, {{"axes", Ints{1}}}));
  g.addOutput("mean", b.create("ReduceMean", "mean", {k}));
  g.addOutput("to", b.create("SumToShape", "to", {k}, {{"shape", Ints{1, 100}}}));
  g.addOutput("soft", b.create("Softmax", "soft", {k}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  const Graph before = g;
  passes::PassResult r = runOnePass(g, kPass);
  EXPECT_EQ(r.effect_times, 4);
  EXPECT_EQ(nodeNamed(g, "sum").attrs.getInts("shape"), (Ints{10}));
  EXPECT_TRUE(sameResults(before, g, {}));
  // Softmax of a splat row is 1/100 in f16.
  EXPECT_EQ(static_cast<float>(nodeNamed(g, "soft").attrs.getFloat("value")),
            Tensor::fromFloats(DType::F16, {1}, {0.01f}).getFloat(0));

  // Past the size limit, the driver leaves them with a reason.
  Graph big = before;
  passes::ConstantFoldingOptions options;
  options.max_reduce_elements = 999;
  passes::PassResult rb = passes::foldConstants(big, options);
  EXPECT_EQ(rb.match_times, 4);
  EXPECT_EQ(rb.effect_times, 0);
  EXPECT_TRUE(hasRejection(rb, "sum", "reduces 1000 elements"));
}

TEST(ConstantFolding, IntegerResultsMustFitAFillValue) {
  Graph g("t");
  ops::OpBuilder b(g);
  ValueId big = b.constant(3037000499.0, DType::I64, "big");
  ValueId one = b.constant(1.0, DType::I64, "one");
  // 3037000499^2 = 9223372030926249001 needs 63 bits: a double cannot hold it.
  g.addOutput("sq", b.create("Mul", "sq", {big, big}));
  g.addOutput("inc", b.create("Add", "inc", {big, one}));
  g.addOutput("flag", b.create("Cast", "flag", {one}, {{"dtype", DType::Bool}}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  const Graph before = g;
  passes::PassResult r = runOnePass(g, kPass);
  EXPECT_EQ(r.effect_times, 2);
  EXPECT_TRUE(hasRejection(r, "sq", "9223372030926249001 cannot be written as a Fill value"));
  EXPECT_EQ(nodeNamed(g, "inc").attrs.getFloat("value"), 3037000500.0);
  EXPECT_EQ(nodeNamed(g, "flag").attrs.getDType("dtype"), DType::Bool);
  ops::TensorMap a = interpretOk(before, {}), c = interpretOk(g, {});
  for (const char *out : {"sq", "inc", "flag"})
    EXPECT_EQ(a.at(out), c.at(out)) << out;
}

TEST(ConstantFolding, NanResultsAreNotFolded) {
  Graph g("t");
  ops::OpBuilder b(g);
  g.addOutput("y", b.create("Sqrt", "root", {b.constant(-1.0, DType::F32, "k", {2})}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  const Graph before = g;
  // SATURATION stores NaN as 0, so on ascend910b the modes disagree first.
  passes::PassResult r = runOnePass(g, kPass);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_TRUE(hasRejection(r, "root", "nan under infnan, 0.0 under saturation"));
  // INFNAN alone: NaN is the result, and a Fill cannot carry it.
  passes::ConstantFoldingOptions infnan;
  infnan.modes = {OverflowMode::InfNan};
  r = passes::foldConstants(g, infnan);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_TRUE(hasRejection(r, "root", "is NaN"));
  // Saturation alone: the stored result is 0, and that folds.
  Graph s = before;
  r = runOnePass(s, kPass, "ascend910");
  EXPECT_EQ(r.effect_times, 1);
  EXPECT_EQ(nodeNamed(s, "root").attrs.getFloat("value"), 0.0);
  EXPECT_TRUE(sameResults(before, s, {}, OverflowMode::Saturation));
}

TEST(ConstantFolding, LeavesFusionGroupsAlone) {
  Graph g("t");
  ops::OpBuilder b(g);
  ValueId k = b.constant(0.1, DType::F16, "k");
  g.addOutput("y", b.create("Mul", "m", {k, k}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  GroupId grp = g.addGroup(FusionGroup{"fused.m", "eltwise", "test", Intermediates::F32});
  g.node(g.findNode("m")).group = grp;
  g.node(g.findNode("k")).group = grp;
  ASSERT_TRUE(g.compact().isOk());
  passes::PassResult r = runOnePass(g, kPass);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_TRUE(hasRejection(r, "m", "fusion group 'fused.m'"));
}

TEST(ConstantFolding, SwitchedOffLeavesTheGraphUnchanged) {
  Graph g("t");
  ops::OpBuilder b(g);
  g.addOutput("y", b.create("Neg", "n", {b.constant(1.0, DType::F32, "k", {3})}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  expectSwitchDecides(g, kPass);
}

} // namespace
} // namespace kiln::testing
