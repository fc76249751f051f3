// Compiled data-movement kernels (compiler/codegen/lowering/shape.cpp) against the reference
// interpreter: every op in every float dtype, plus integer and bool data, odd shapes and attrs.
#include <gtest/gtest.h>

#include "tests/support/codegen_test_util.h"

namespace kiln::testing {
namespace {

const DType kFloats[] = {DType::F32, DType::F16, DType::BF16};
const DType kData[] = {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::Bool};

TEST(ShapeLowering, ReshapeSplitsAndMergesAxes) {
  for (DType d : kData) {
    expectOpMatchesReference("Reshape", {{d, {2, 3, 4}}}, {{"shape", Shape{6, 4}}});
    expectOpMatchesReference("Reshape", {{d, {2, 3, 4}}}, {{"shape", Shape{2, 12}}});
    expectOpMatchesReference("Reshape", {{d, {2, 3, 4}}}, {{"shape", Shape{24}}});
    expectOpMatchesReference("Reshape", {{d, {2, 12}}}, {{"shape", Shape{2, 3, -1}}});
  }
  for (DType d : kFloats) {
    // Runs whose axes do not line up: [3, 8] and [2, 3, 4] share only their total.
    expectOpMatchesReference("Reshape", {{d, {3, 8}}}, {{"shape", Shape{2, 3, 4}}});
    expectOpMatchesReference("Reshape", {{d, {4, 6, 5}}}, {{"shape", Shape{8, 3, 5}}});
    // Size-1 axes appear and vanish.
    expectOpMatchesReference("Reshape", {{d, {1, 6, 1, 4}}}, {{"shape", Shape{2, 1, 12}}});
    expectOpMatchesReference("Reshape", {{d, {5, 1}}}, {{"shape", Shape{1, 5}}});
    expectOpMatchesReference("Reshape", {{d, {}}}, {{"shape", Shape{1, 1}}});
    expectOpMatchesReference("Reshape", {{d, {1}}}, {{"shape", Shape{}}});
    expectOpMatchesReference("Reshape", {{d, {2, 3, 4, 5}}}, {{"shape", Shape{6, 20}}});
  }
}

TEST(ShapeLowering, ReshapeOfNothing) {
  expectOpMatchesReference("Reshape", {{DType::F32, {0, 3}}}, {{"shape", Shape{3, 0}}});
}

TEST(ShapeLowering, TransposePermutesAxes) {
  for (DType d : kData) {
    expectOpMatchesReference("Transpose", {{d, {2, 3, 4}}}, {{"perm", Shape{2, 0, 1}}});
    expectOpMatchesReference("Transpose", {{d, {5, 7}}}, {{"perm", Shape{1, 0}}});
  }
  for (DType d : kFloats) {
    expectOpMatchesReference("Transpose", {{d, {2, 3, 4, 5}}}, {{"perm", Shape{0, 2, 1, 3}}});
    expectOpMatchesReference("Transpose", {{d, {2, 3, 4}}}, {{"perm", Shape{0, 1, 2}}});
    expectOpMatchesReference("Transpose", {{d, {}}}, {{"perm", Shape{}}});
  }
}

TEST(ShapeLowering, SliceTakesABox) {
  for (DType d : kData)
    expectOpMatchesReference("Slice", {{d, {5, 7}}},
                             {{"begin", Shape{1, 2}}, {"end", Shape{4, 7}}});
  for (DType d : kFloats) {
    expectOpMatchesReference("Slice", {{d, {2, 3, 9}}},
                             {{"begin", Shape{1, 0, 3}}, {"end", Shape{2, 3, 9}}});
    expectOpMatchesReference("Slice", {{d, {2, 3, 4}}},
                             {{"begin", Shape{0, 1, 0}}, {"end", Shape{2, 3, 0}}});
  }
}

TEST(ShapeLowering, PadSurroundsWithTheValue) {
  for (DType d : kData)
    expectOpMatchesReference("Pad", {{d, {3, 4}}},
                             {{"before", Shape{1, 0}}, {"after", Shape{2, 3}}, {"value", 1.5}});
  for (DType d : kFloats) {
    expectOpMatchesReference(
        "Pad", {{d, {2, 3, 4}}},
        {{"before", Shape{0, 1, 2}}, {"after", Shape{0, 0, 1}}, {"value", 0.0}});
    expectOpMatchesReference("Pad", {{d, {2, 5}}},
                             {{"before", Shape{0, 0}}, {"after", Shape{0, 0}}, {"value", 3.0}});
    // An empty input is all border.
    expectOpMatchesReference("Pad", {{d, {0, 3}}},
                             {{"before", Shape{1, 1}}, {"after", Shape{0, 1}}, {"value", -2.0}});
  }
  // The value rounds to the dtype: it overflows f16 to inf, or to the f16 max under saturation.
  const AttrMap huge{{"before", Shape{1, 1}}, {"after", Shape{1, 1}}, {"value", 1e6}};
  expectOpMatchesReference("Pad", {{DType::F16, {2, 2}}}, huge);
  CompareOptions saturation;
  saturation.overflow = OverflowMode::Saturation;
  expectOpMatchesReference("Pad", {{DType::F16, {2, 2}}}, huge, saturation);
}

TEST(ShapeLowering, ConcatJoinsAlongAnAxis) {
  for (DType d : kData)
    expectOpMatchesReference("Concat", {{d, {2, 3}}, {d, {2, 1}}, {d, {2, 4}}}, {{"axis", 1}});
  for (DType d : kFloats) {
    expectOpMatchesReference("Concat", {{d, {1, 3, 2}}, {d, {2, 3, 2}}}, {{"axis", 0}});
    expectOpMatchesReference("Concat", {{d, {2, 3, 2}}, {d, {2, 3, 5}}}, {{"axis", -1}});
    expectOpMatchesReference("Concat", {{d, {2, 0}}, {d, {2, 3}}, {d, {2, 0}}, {d, {2, 2}}},
                             {{"axis", 1}});
    expectOpMatchesReference("Concat", {{d, {4, 3}}}, {{"axis", 0}});
  }
}

TEST(ShapeLowering, SplitCutsAlongAnAxis) {
  for (DType d : kData)
    expectOpMatchesReference("Split", {{d, {4, 9}}}, {{"axis", 1}, {"sizes", Shape{2, 3, 4}}});
  for (DType d : kFloats) {
    expectOpMatchesReference("Split", {{d, {4, 3, 2}}}, {{"axis", -3}, {"sizes", Shape{1, 3}}});
    expectOpMatchesReference("Split", {{d, {4, 9}}}, {{"axis", -1}, {"sizes", Shape{0, 9}}});
    expectOpMatchesReference("Split", {{d, {5}}}, {{"axis", 0}, {"sizes", Shape{5}}});
  }
}

TEST(ShapeLowering, BroadcastToStretchesSizeOneAxes) {
  for (DType d : kData)
    expectOpMatchesReference("BroadcastTo", {{d, {3, 1}}}, {{"shape", Shape{2, 3, 5}}});
  for (DType d : kFloats) {
    expectOpMatchesReference("BroadcastTo", {{d, {}}}, {{"shape", Shape{4}}});
    expectOpMatchesReference("BroadcastTo", {{d, {1}}}, {{"shape", Shape{3, 2}}});
    expectOpMatchesReference("BroadcastTo", {{d, {2, 1, 4}}}, {{"shape", Shape{2, 3, 4}}});
  }
}

TEST(ShapeLowering, RotateHalfSwapsAndNegatesHalves) {
  for (DType d : kFloats) {
    expectOpMatchesReference("RotateHalf", {{d, {2, 3, 8}}});
    expectOpMatchesReference("RotateHalf", {{d, {4, 2}}});
    expectOpMatchesReference("RotateHalf", {{d, {128}}});
  }
}

// Enough rows for the kernel to split them into parallel tiles.
TEST(ShapeLowering, ManyRows) {
  expectOpMatchesReference("Reshape", {{DType::BF16, {64, 12, 32}}}, {{"shape", Shape{64, 384}}});
  expectOpMatchesReference("Transpose", {{DType::F16, {48, 64, 8}}}, {{"perm", Shape{1, 0, 2}}});
  expectOpMatchesReference("Concat", {{DType::F32, {96, 40}}, {DType::F32, {96, 24}}},
                           {{"axis", 1}});
  expectOpMatchesReference("Pad", {{DType::F32, {100, 30}}},
                           {{"before", Shape{2, 1}}, {"after", Shape{0, 3}}, {"value", 0.0}});
}

} // namespace
} // namespace kiln::testing
