// The FlashAttentionScore kernels (tiled host routines the generated kernels
// call) against the reference kernels: forward and backward, multi-head and
// grouped-query attention, sequences shorter than, equal to and past one
// 128-row block and not a multiple of it, every float dtype, in BNSD and
// BSND.
#include <cmath>

#include <gtest/gtest.h>

#include "tests/support/codegen_test_util.h"
#include "tests/support/op_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

struct Case {
  int64_t B, N, Nkv, S, D;
  bool bsnd = false;
  // q's type and k's and v's in the case's layout.
  TensorType q(DType d) const { return {d, bsnd ? Shape{B, S, N, D} : Shape{B, N, S, D}}; }
  TensorType kv(DType d) const { return {d, bsnd ? Shape{B, S, Nkv, D} : Shape{B, Nkv, S, D}}; }
};

// BSND's rows are (b, s), over which the routines spread their heads: one
// batch of one head, heads not dividing the rows, grouped heads. Past 512
// keys a second key block begins, which the first rows do not see at all.
const Case kCases[] = {{1, 2, 2, 7, 8},         {2, 4, 2, 33, 16},       {1, 2, 1, 130, 8},
                       {1, 1, 1, 300, 4},       {1, 1, 1, 600, 4},       {1, 2, 2, 7, 8, true},
                       {2, 4, 2, 33, 16, true}, {3, 3, 1, 130, 8, true}, {1, 1, 1, 300, 4, true}};

AttrMap attrsOf(const Case &c) {
  return {{"scale", 1.0 / std::sqrt(static_cast<double>(c.D))},
          {"input_layout", std::string(c.bsnd ? "BSND" : "BNSD")}};
}

std::string nameOf(DType d, const Case &c) {
  return std::string(dtypeName(d)) + (c.bsnd ? " BSND" : " BNSD") + " S " + std::to_string(c.S) +
         " N " + std::to_string(c.N) + "/" + std::to_string(c.Nkv);
}

TEST(FlashAttentionLowering, ForwardMatchesTheReference) {
  for (DType d : {DType::F32, DType::F16, DType::BF16})
    for (const Case &c : kCases) {
      SCOPED_TRACE(nameOf(d, c));
      const TensorType q = c.q(d), kv = c.kv(d);
      CompareOptions options;
      options.rtol = d == DType::F32 ? 1e-5 : 1e-2;
      options.atol = d == DType::F32 ? 1e-6 : 1e-2;
      expectOpMatchesReference("FlashAttentionScore", {q, kv, kv}, attrsOf(c), options, 5);
    }
}

TEST(FlashAttentionLowering, BackwardMatchesTheReference) {
  for (DType d : {DType::F32, DType::BF16})
    for (const Case &c : kCases) {
      SCOPED_TRACE(nameOf(d, c));
      // Consistent statistics: the forward's on the same q, k, v.
      const TensorType q = c.q(d), kv = c.kv(d);
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
