// Compiled CrossEntropyLoss and CrossEntropyLossGrad (compiler/codegen/lowering/loss.cpp)
// against the reference interpreter: i32 and i64 labels, ignored rows, an all-ignored batch.
#include <gtest/gtest.h>

#include "ops/op_builder.h"
#include "tests/support/codegen_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

const DType kFloats[] = {DType::F32, DType::F16, DType::BF16};

AttrMap ignoring(int64_t index) { return {{"ignore_index", index}}; }

// Random labels lie in [0, 8): with ignore_index 3 about one row in eight is left out.
TEST(LossLowering, CrossEntropyLossMatchesReference) {
  for (DType d : kFloats)
    for (DType label : {DType::I32, DType::I64}) {
      expectOpMatchesReference("CrossEntropyLoss", {{d, {6, 10}}, {label, {6}}}, ignoring(-100));
      expectOpMatchesReference("CrossEntropyLoss", {{d, {40, 8}}, {label, {40}}}, ignoring(3));
      expectOpMatchesReference("CrossEntropyLoss", {{d, {1, 8}}, {label, {1}}}, ignoring(-100));
    }
}

TEST(LossLowering, CrossEntropyLossGradMatchesReference) {
  for (DType d : kFloats)
    for (DType label : {DType::I32, DType::I64}) {
      expectOpMatchesReference("CrossEntropyLossGrad",
                               {{d, {6, 10}}, {label, {6}}, {DType::F32, {}}}, ignoring(-100));
      expectOpMatchesReference("CrossEntropyLossGrad",
                               {{d, {40, 8}}, {label, {40}}, {DType::F32, {}}}, ignoring(3));
    }
}

// Enough rows for the kernel to split them into parallel tiles, and a vocabulary-sized row.
TEST(LossLowering, ManyRowsAndWideRows) {
  expectOpMatchesReference("CrossEntropyLoss", {{DType::BF16, {256, 64}}, {DType::I64, {256}}},
                           ignoring(0));
  expectOpMatchesReference("CrossEntropyLossGrad",
                           {{DType::BF16, {256, 64}}, {DType::I64, {256}}, {DType::F32, {}}},
                           ignoring(0));
  expectOpMatchesReference("CrossEntropyLoss", {{DType::F32, {3, 5000}}, {DType::I32, {3}}},
                           ignoring(-100));
  expectOpMatchesReference("CrossEntropyLossGrad",
                           {{DType::F32, {3, 5000}}, {DType::I32, {3}}, {DType::F32, {}}},
                           ignoring(-100));
}

// Labels of -100 and 9 (ignore_index) next to kept ones; then a batch with every row ignored,
// whose loss is 0 and whose gradient is all zeros.
TEST(LossLowering, IgnoredRowsAndAllIgnoredBatch) {
  for (DType d : kFloats) {
    const Tensor logits = randomTensor({d, {5, 12}}, 7, -4.0f, 4.0f);
    const Tensor dloss = Tensor::scalar(DType::F32, 0.75);
    const Tensor some = Tensor::fromInts(DType::I64, {5}, {9, 0, 11, 9, 4});
    expectOpOnInputs("CrossEntropyLoss", {logits, some}, ignoring(9));
    expectOpOnInputs("CrossEntropyLossGrad", {logits, some, dloss}, ignoring(9));
    const Tensor none = Tensor::fromInts(DType::I32, {5}, {-100, -100, -100, -100, -100});
    expectOpOnInputs("CrossEntropyLoss", {logits, none}, ignoring(-100));
    expectOpOnInputs("CrossEntropyLossGrad", {logits, none, dloss}, ignoring(-100));
  }
}

} // namespace
} // namespace kiln::testing
