// Compiled AdamW (compiler/codegen/lowering/adamw.cpp) against the reference interpreter:
// every param dtype, f32 gradients for low-precision params, several steps and attributes.
#include <gtest/gtest.h>

#include "ops/op_builder.h"
#include "tests/support/codegen_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

const DType kFloats[] = {DType::F32, DType::F16, DType::BF16};

AttrMap adamAttrs(double b1, double b2, double eps, double wd) {
  return {{"beta1", b1}, {"beta2", b2}, {"eps", eps}, {"weight_decay", wd}};
}

// One AdamW step `step` on random state (v >= 0, as a second moment is), compiled vs reference.
// With `zero_state` param, m and v start at 0: the new param is the update alone, so its error
// shows undiluted, and no cancellation in m or v hides it.
void expectStepMatches(DType param, DType grad, int64_t step, double lr, const AttrMap &attrs,
                       bool zero_state = false, const CompareOptions &options = {}) {
  const Shape shape{4, 33};
  auto state = [&](DType d, uint64_t seed, float lo, float hi) {
    return zero_state ? Tensor(TensorType{d, shape}) : randomTensor({d, shape}, seed, lo, hi);
  };
  Graph g("adamw");
  ops::TensorMap feed{
      {"param", state(param, 1, -1.0f, 1.0f)},
      {"grad", randomTensor({grad, shape}, 2, -1.0f, 1.0f)},
      {"m", state(DType::F32, 3, -0.1f, 0.1f)},
      {"v", state(DType::F32, 4, 0.0f, 0.01f)},
      {"lr", Tensor::scalar(DType::F32, lr)},
      {"step", Tensor::scalar(DType::I64, static_cast<double>(step))},
  };
  std::vector<ValueId> args;
  for (const char *name : {"param", "grad", "m", "v", "lr", "step"})
    args.push_back(g.addInput(name, feed.at(name).type(), InputRole::Data));
  ops::OpBuilder b(g);
  auto outs = b.tryCreate("AdamW", "adamw", args, attrs);
  ASSERT_TRUE(outs.isOk()) << outs.message();
  for (size_t k = 0; k < outs->size(); ++k)
    g.addOutput("out_" + std::to_string(k), (*outs)[k]);
  SCOPED_TRACE("AdamW step " + std::to_string(step));
  expectCompiledMatchesReference(g, feed, options);
}

TEST(AdamWLowering, StepsMatchReference) {
  for (DType d : kFloats)
    for (int64_t step : {1, 2, 10, 1000, 100000})
      expectStepMatches(d, d, step, 1e-2, adamAttrs(0.9, 0.95, 1e-6, 0.0));
}

// beta2 = 0.999 makes 1 - beta2^t cancel in f32 at small t; the lowering avoids it.
TEST(AdamWLowering, BiasCorrectionNearOne) {
  for (DType d : kFloats)
    for (int64_t step : {1, 3, 700, 5000})
      expectStepMatches(d, d, step, 3e-4, adamAttrs(0.9, 0.999, 1e-8, 0.1));
}

// The update alone, to a few f32 ulps: a naive f32 1 - pow(0.999f, t) is off by ~1e-5 at t = 1
// (and pow amplifies the rounding of beta t times), which this tolerance catches.
TEST(AdamWLowering, BiasCorrectionIsAccurateInF32) {
  CompareOptions tight;
  tight.rtol = 2e-6;
  tight.atol = 1e-12;
  for (int64_t step : {1, 2, 30, 1000, 20000})
    expectStepMatches(DType::F32, DType::F32, step, 1.0, adamAttrs(0.9, 0.999, 1e-8, 0.0), true,
                      tight);
}

TEST(AdamWLowering, WeightDecayZeroBetaAndF32Gradients) {
  for (DType d : kFloats) {
    expectStepMatches(d, DType::F32, 5, 1e-2, adamAttrs(0.9, 0.95, 1e-6, 0.01));
    expectStepMatches(d, d, 1, 1e-3, adamAttrs(0.0, 0.0, 1e-6, 0.5));
    expectStepMatches(d, d, 4, 1.0, adamAttrs(0.5, 0.9, 1e-3, 0.0));
  }
}

} // namespace
} // namespace kiln::testing
