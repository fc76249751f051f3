// Compiled RotaryCosSin (compiler/codegen/lowering/rotary.cpp) against the reference
// interpreter: tables of several lengths, head dims and bases.
#include <gtest/gtest.h>

#include "tests/support/codegen_test_util.h"

namespace kiln::testing {
namespace {

AttrMap rotaryAttrs(int64_t seq_len, int64_t dim, double base) {
  return {{"seq_len", seq_len}, {"dim", dim}, {"base", base}};
}

TEST(RotaryLowering, CosSinTablesMatchReference) {
  expectOpMatchesReference("RotaryCosSin", {}, rotaryAttrs(16, 8, 10000));
  expectOpMatchesReference("RotaryCosSin", {}, rotaryAttrs(1, 2, 10000));
  expectOpMatchesReference("RotaryCosSin", {}, rotaryAttrs(37, 6, 500));
  expectOpMatchesReference("RotaryCosSin", {}, rotaryAttrs(64, 128, 1000000));
}

// Long tables: freq = t * inv_freq reaches thousands of radians, where a 1-ulp difference in
// inv_freq would show, so this checks that inv_freq is computed exactly as the reference does.
TEST(RotaryLowering, LongTablesKeepInvFreqExact) {
  expectOpMatchesReference("RotaryCosSin", {}, rotaryAttrs(4096, 64, 10000));
  expectOpMatchesReference("RotaryCosSin", {}, rotaryAttrs(2048, 128, 1000000));
}

} // namespace
} // namespace kiln::testing
