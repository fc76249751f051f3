// The FlashAttentionScore kernels (tiled host routines the generated kernels
// call) against the reference kernels: forward and backward, multi-head and
// grouped-query attention, sequences shorter than, equal to and past one
// 128-row block and not a multiple of it, every float dtype.
#include <cmath>

#include <gtest/gtest.h>

#include "tests/support/codegen_test_util.h"
#include "tests/support/op_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

struct Case {
  int64_t B, N, Nkv, S, D;
};

const Case kCases[] = {{1, 2, 2, 7, 8}, {2, 4, 2, 33, 16}, {1, 2, 1, 130, 8}, {1, 1, 1, 300, 4}};

AttrMap attrsOf(const Case &c) { return {{"scale", 1.0 / std::sqrt(static_cast<double>(c.D))}}; }

TEST(FlashAttentionLowering, ForwardMatchesTheReference) {
  for (DType d : {DType::F32, DType::F16, DType::BF16})
    for (const Case &c : kCases) {
      SCOPED_TRACE(std::string(dtypeName(d)) + " S " + std::to_string(c.S) + " N " +
                   std::to_string(c.N) + "/" + std::to_string(c.Nkv));
      const TensorType q{d, {c.B, c.N, c.S, c.D}}, kv{d, {c.B, c.Nkv, c.S, c.D}};
      CompareOptions options;
      options.rtol = d == DType::F32 ? 1e-5 : 1e-2;
      options.atol = d == DType::F32 ? 1e-6 : 1e-2;
      expectOpMatchesReference("FlashAttentionScore", {q, kv, kv}, attrsOf(c), options, 5);
    }
}

TEST(FlashAttentionLowering, BackwardMatchesTheReference) {
  for (DType d : {DType::F32, DType::BF16})
    for (const Case &c : kCases) {
      SCOPED_TRACE(std::string(dtypeName(d)) + " S " + std::to_string(c.S) + " N " +
                   std::to_string(c.N) + "/" + std::to_string(c.Nkv));
      // Consistent statistics: the forward's on the same q, k, v.
      const TensorType q{d, {c.B, c.N, c.S, c.D}}, kv{d, {c.B, c.Nkv, c.S, c.D}};
      const TensorType stats{DType::F32, {c.B, c.N, c.S}};
      std::vector<Tensor> in = {randomTensor(q, 1), randomTensor(kv, 2), randomTensor(kv, 3)};
      auto fwd = runOp("FlashAttentionScore", in, attrsOf(c));
      ASSERT_TRUE(fwd.isOk()) << fwd.message();
      in.push_back((*fwd)[0]);
      in.push_back(randomTensor(q, 4));
      in.push_back((*fwd)[1]);
      in.push_back((*fwd)[2]);
      CompareOptions options;
      options.rtol = d == DType::F32 ? 1e-4 : 2e-2;
      options.atol = d == DType::F32 ? 1e-5 : 2e-2;
      expectOpOnInputs("FlashAttentionScoreGrad", in, attrsOf(c), options);
    }
}

} // namespace
} // namespace kiln::testing
