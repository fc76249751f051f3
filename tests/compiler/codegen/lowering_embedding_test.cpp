// Compiled Gather and EmbeddingGrad (compiler/codegen/lowering/embedding.cpp) against the
// reference interpreter, with i32 and i64 indices of several ranks. The random indices lie in
// [0, 8), so the tables have at least 8 rows and repeated indices exercise the scatter-add.
#include <gtest/gtest.h>

#include "tests/support/codegen_test_util.h"

namespace kiln::testing {
namespace {

const DType kFloats[] = {DType::F32, DType::F16, DType::BF16};

TEST(EmbeddingLowering, GatherPicksRows) {
  for (DType d : kFloats)
    for (DType index : {DType::I32, DType::I64}) {
      expectOpMatchesReference("Gather", {{d, {10, 4}}, {index, {3, 5}}});
      expectOpMatchesReference("Gather", {{d, {8}}, {index, {6}}});
      expectOpMatchesReference("Gather", {{d, {9, 2, 3}}, {index, {}}});
      expectOpMatchesReference("Gather", {{d, {8, 16}}, {index, {2, 0}}});
    }
}

TEST(EmbeddingLowering, EmbeddingGradScatterAddsRows) {
  for (DType d : kFloats)
    for (DType index : {DType::I32, DType::I64}) {
      expectOpMatchesReference("EmbeddingGrad", {{d, {3, 5, 4}}, {index, {3, 5}}},
                               {{"num_rows", int64_t{8}}});
      expectOpMatchesReference("EmbeddingGrad", {{d, {6}}, {index, {6}}},
                               {{"num_rows", int64_t{10}}});
      expectOpMatchesReference("EmbeddingGrad", {{d, {2, 3}}, {index, {}}},
                               {{"num_rows", int64_t{8}}});
      expectOpMatchesReference("EmbeddingGrad", {{d, {40, 7}}, {index, {40}}},
                               {{"num_rows", int64_t{12}}});
    }
}

// Enough rows for the kernel to split them into parallel tiles.
TEST(EmbeddingLowering, ManyRows) {
  expectOpMatchesReference("Gather", {{DType::BF16, {8, 256}}, {DType::I64, {4, 64}}});
  for (DType d : kFloats) // bf16 and f16 rows are widened by the vector loop
    expectOpMatchesReference("EmbeddingGrad", {{d, {4, 64, 32}}, {DType::I32, {4, 64}}},
                             {{"num_rows", int64_t{200}}});
}

} // namespace
} // namespace kiln::testing
