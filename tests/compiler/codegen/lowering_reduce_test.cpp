// Compiled reductions (compiler/codegen/lowering/reduce.cpp) against the reference interpreter:
// ReduceSum and ReduceMean over axis sets with and without keepdims, and SumToShape.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/codegen_test_util.h"

namespace kiln::testing {
namespace {

const DType kFloats[] = {DType::F32, DType::F16, DType::BF16};

AttrMap reduceAttrs(Shape axes, bool keepdims) {
  return {{"axes", std::move(axes)}, {"keepdims", keepdims}};
}

TEST(ReduceLowering, SumAndMeanOverAxisSets) {
  for (DType d : kFloats)
    for (const char *op : {"ReduceSum", "ReduceMean"})
      for (bool keepdims : {false, true}) {
        expectOpMatchesReference(op, {{d, {3, 4, 5}}}, reduceAttrs({}, keepdims));
        expectOpMatchesReference(op, {{d, {3, 4, 5}}}, reduceAttrs({1}, keepdims));
        expectOpMatchesReference(op, {{d, {3, 4, 5}}}, reduceAttrs({0, 2}, keepdims));
        expectOpMatchesReference(op, {{d, {3, 4, 5}}}, reduceAttrs({-1}, keepdims));
        expectOpMatchesReference(op, {{d, {3, 4, 5}}}, reduceAttrs({2, -3, 1}, keepdims));
        expectOpMatchesReference(op, {{d, {4, 1, 3}}}, reduceAttrs({1}, keepdims));
        expectOpMatchesReference(op, {{d, {}}}, reduceAttrs({}, keepdims));
      }
}

TEST(ReduceLowering, LongRowsAccumulateInF32) {
  for (DType d : kFloats) {
    expectOpMatchesReference("ReduceSum", {{d, {2, 1000}}}, reduceAttrs({1}, false));
    expectOpMatchesReference("ReduceMean", {{d, {300, 3}}}, reduceAttrs({0}, true));
  }
}

// An empty reduction: a sum of 0, and 0/0 = NaN for the mean as in numpy.
TEST(ReduceLowering, EmptyAxes) {
  expectOpMatchesReference("ReduceSum", {{DType::F32, {0, 3}}}, reduceAttrs({0}, false));
  expectOpMatchesReference("ReduceMean", {{DType::F32, {0, 3}}}, reduceAttrs({0}, false));
}

// Max and min reductions vectorise and still propagate a NaN, as the
// reference does; a row without one is its plain extremum.
TEST(ReduceLowering, ExtremaPropagateNaN) {
  std::vector<float> values(4 * 100);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<float>((i * 37) % 101) - 50.0f;
  values[1 * 100 + 17] = NAN;
  values[3 * 100 + 99] = NAN;
  const Tensor x = Tensor::fromFloats(DType::F32, {4, 100}, values);
  for (const char *op : {"ReduceMax", "ReduceMin"})
    for (DType d : kFloats)
      expectOpOnInputs(op, {x.castTo(d)}, reduceAttrs({1}, false));
}

TEST(ReduceLowering, SumToShapeSumsBroadcastAxes) {
  for (DType d : kFloats) {
    expectOpMatchesReference("SumToShape", {{d, {2, 3, 4}}}, {{"shape", Shape{3, 1}}});
    expectOpMatchesReference("SumToShape", {{d, {2, 3, 4}}}, {{"shape", Shape{1, 3, 4}}});
    expectOpMatchesReference("SumToShape", {{d, {2, 3, 4}}}, {{"shape", Shape{4}}});
    expectOpMatchesReference("SumToShape", {{d, {2, 3, 4}}}, {{"shape", Shape{}}});
    expectOpMatchesReference("SumToShape", {{d, {2, 3, 4}}}, {{"shape", Shape{2, 1, 1}}});
    expectOpMatchesReference("SumToShape", {{d, {2, 3, 4}}}, {{"shape", Shape{2, 3, 4}}});
    expectOpMatchesReference("SumToShape", {{d, {5, 1}}}, {{"shape", Shape{1}}});
  }
}

} // namespace
} // namespace kiln::testing
