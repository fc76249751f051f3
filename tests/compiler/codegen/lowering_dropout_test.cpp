// The Dropout kernel (a host routine the generated kernel calls) drops and
// scales exactly the elements the reference drops, in every float dtype.
#include <gtest/gtest.h>

#include "tests/support/codegen_test_util.h"

namespace kiln::testing {
namespace {

TEST(DropoutLowering, CompiledDropsWhatTheReferenceDrops) {
  for (DType d : {DType::F32, DType::F16, DType::BF16})
    for (Shape shape : {Shape{3, 5}, Shape{64, 96}, Shape{1, 1}}) {
      SCOPED_TRACE(std::string(dtypeName(d)) + " " + shapeToString(shape));
      expectOpMatchesReference("Dropout", {{d, shape}, {DType::I64, {}}},
                               {{"p", 0.25}, {"stream", int64_t{3}}}, {}, 9);
    }
}

} // namespace
} // namespace kiln::testing
