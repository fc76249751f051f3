// Compiled elementwise, broadcast and row kernels against the reference
// interpreter, one op at a time, in every float dtype and both overflow modes.
#include <gtest/gtest.h>

#include "ops/op_builder.h"
#include "tests/support/codegen_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

const DType kFloats[] = {DType::F32, DType::F16, DType::BF16};

TEST(ElementwiseLowering, UnaryOpsMatchReference) {
  for (DType d : kFloats)
    for (const char *op : {"Neg", "Exp", "Sigmoid", "Silu"})
      expectOpMatchesReference(op, {{d, {3, 37}}});
  // Log, Sqrt and Rsqrt of negative inputs are NaN on both sides.
  for (DType d : kFloats)
    for (const char *op : {"Log", "Sqrt", "Rsqrt"})
      expectOpMatchesReference(op, {{d, {5, 8}}});
}

TEST(ElementwiseLowering, BinaryOpsBroadcast) {
  for (DType d : kFloats)
    for (const char *op : {"Add", "Sub", "Mul", "Div"}) {
      expectOpMatchesReference(op, {{d, {2, 3, 17}}, {d, {2, 3, 17}}});
      expectOpMatchesReference(op, {{d, {2, 3, 17}}, {d, {17}}});
      expectOpMatchesReference(op, {{d, {2, 1, 17}}, {d, {3, 1}}});
      expectOpMatchesReference(op, {{d, {4, 5}}, {d, {}}});
    }
}

TEST(ElementwiseLowering, IntegerArithmeticWraps) {
  for (const char *op : {"Add", "Sub", "Mul"})
    expectOpMatchesReference(op, {{DType::I64, {4, 9}}, {DType::I64, {9}}});
  expectOpMatchesReference("Neg", {{DType::I32, {7}}});
}

TEST(ElementwiseLowering, FusedBackwardOps) {
  for (DType d : kFloats) {
    expectOpMatchesReference("RsqrtGrad", {{d, {3, 16}}, {d, {3, 16}}});
    expectOpMatchesReference("SiluGrad", {{d, {3, 16}}, {d, {3, 16}}});
    expectOpMatchesReference("BiasAdd", {{d, {2, 5, 16}}, {d, {16}}});
    expectOpMatchesReference("AddN", {{d, {6, 7}}, {d, {6, 7}}, {d, {6, 7}}});
  }
}

TEST(ElementwiseLowering, CastsBetweenEveryPair) {
  for (DType from : kAllDTypes)
    for (DType to : kAllDTypes)
      expectOpMatchesReference("Cast", {{from, {3, 11}}}, {{"dtype", to}});
}

TEST(ElementwiseLowering, FillAndCausalMask) {
  for (DType d : kAllDTypes)
    expectOpMatchesReference(
        "Fill", {}, {{"value", isFloat(d) ? 2.5 : 1.0}, {"dtype", d}, {"shape", Shape{3, 4}}});
  for (DType d : kFloats) {
    expectOpMatchesReference("CausalMask", {{d, {2, 6, 6}}}, {{"fill", -60000.0}});
    expectOpMatchesReference("CausalMask", {{d, {2, 3, 6}}}, {{"fill", -1e30}});
  }
}

TEST(ElementwiseLowering, OverflowModesRoundLikeTheChip) {
  CompareOptions saturation;
  saturation.overflow = OverflowMode::Saturation;
  for (DType d : {DType::F16, DType::BF16, DType::F32}) {
    // exp of large inputs overflows every dtype; saturation clamps, INFNAN gives inf.
    Graph g("overflow");
    ValueId x = g.addInput("x", {DType::F32, {64}}, InputRole::Data);
    ops::OpBuilder b(g);
    ValueId y = b.create("Cast", "cast", {b.create("Exp", "exp", {x})}, {{"dtype", d}});
    g.addOutput("y", y);
    ops::TensorMap in{{"x", randomTensor({DType::F32, {64}}, 3, -100.0f, 100.0f)}};
    expectCompiledMatchesReference(g, in);
    expectCompiledMatchesReference(g, in, saturation);
    // NaN: 0 under saturation, NaN under INFNAN.
    Graph h("nan");
    ValueId z = h.addInput("z", {DType::F32, {8}}, InputRole::Data);
    ops::OpBuilder hb(h);
    h.addOutput("y", hb.create("Cast", "cast", {hb.create("Log", "log", {z})}, {{"dtype", d}}));
    ops::TensorMap nan_in{{"z", randomTensor({DType::F32, {8}}, 4, -1.0f, 1.0f)}};
    expectCompiledMatchesReference(h, nan_in);
    expectCompiledMatchesReference(h, nan_in, saturation);
  }
}

TEST(RowLowering, SoftmaxAndItsGradientOnEveryAxis) {
  for (DType d : kFloats)
    for (int64_t axis : {-1, 0, 1, 2}) {
      expectOpMatchesReference("Softmax", {{d, {3, 5, 7}}}, {{"axis", axis}});
      expectOpMatchesReference("SoftmaxGrad", {{d, {3, 5, 7}}, {d, {3, 5, 7}}}, {{"axis", axis}});
    }
}

} // namespace
} // namespace kiln::testing
