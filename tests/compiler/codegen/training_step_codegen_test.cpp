// The whole tiny Qwen training step (forward, loss, backward, AdamW) compiled
// to kernels against the reference interpreter running the same graph, fused
// by the default pipeline and unfused, in every float dtype, on both targets.
#include <gtest/gtest.h>

#include "compiler/codegen/kernel_compiler.h"
#include "tests/support/codegen_test_util.h"
#include "tests/support/pass_test_util.h"

namespace kiln::testing {
namespace {

struct Case {
  DType dtype;
  std::string target;
  bool fused;
};

class TrainingStepCodegen : public ::testing::TestWithParam<Case> {};

TEST_P(TrainingStepCodegen, CompiledKernelsMatchTheInterpreter) {
  const Case &c = GetParam();
  TinyTrainingStep step = tinyTrainingStep(c.dtype);
  runPasses(step.graph, c.fused ? contextFor(c.target) : noFusion(c.target));
  if (c.fused) {
    EXPECT_GT(step.graph.groups().size(), 0u);
  }
  CompareOptions options;
  options.target = c.target;
  options.overflow = c.target == "ascend910" ? OverflowMode::Saturation : OverflowMode::InfNan;
  // Accumulation order differs from the interpreter's double sums; a 16-bit
  // result may land one rounding step away.
  options.rtol = c.dtype == DType::F32 ? 2e-4 : (c.dtype == DType::F16 ? 4e-3 : 3e-2);
  options.atol = c.dtype == DType::F32 ? 1e-5 : (c.dtype == DType::F16 ? 2e-3 : 2e-2);
  expectCompiledMatchesReference(step.graph, step.feed, options);
}

std::string caseName(const ::testing::TestParamInfo<Case> &info) {
  return std::string(dtypeName(info.param.dtype)) + "_" + info.param.target +
         (info.param.fused ? "_fused" : "_unfused");
}

INSTANTIATE_TEST_SUITE_P(
    Dtypes, TrainingStepCodegen,
    ::testing::Values(Case{DType::F32, "ascend910b", true}, Case{DType::F32, "ascend910b", false},
                      Case{DType::F16, "ascend910b", true}, Case{DType::F16, "ascend910b", false},
                      Case{DType::BF16, "ascend910b", true}, Case{DType::BF16, "ascend910b", false},
                      Case{DType::F16, "ascend910", true}, Case{DType::F16, "ascend910", false}),
    caseName);

TEST(TrainingStepCodegen, IdenticalLayersCompileOnce) {
  TinyTrainingStep step = tinyTrainingStep(DType::F16);
  runPasses(step.graph, contextFor("ascend910b"));
  auto target = target::loadTarget("ascend910b");
  ASSERT_TRUE(target.isOk());
  auto kernels = codegen::compileKernels(step.graph, *target, {});
  ASSERT_TRUE(kernels.isOk()) << kernels.message();
  EXPECT_EQ(kernels->stats.total, static_cast<int64_t>(kernels->kernels.size()));
  EXPECT_LT(kernels->stats.unique, kernels->stats.total);
  EXPECT_EQ(kernels->stats.compiled, kernels->stats.unique);
  EXPECT_EQ(kernels->stats.cache_hits, 0);
  // The same kernel of layer 0 and layer 1 shares one object.
  std::map<std::string, int> object_of;
  for (const codegen::CompiledKernel &k : kernels->kernels)
    object_of[k.spec.name] = k.object;
  ASSERT_TRUE(object_of.count("fused.transformer.h.0.attn.softmax"));
  EXPECT_EQ(object_of["fused.transformer.h.0.attn.softmax"],
            object_of["fused.transformer.h.1.attn.softmax"]);
}

} // namespace
} // namespace kiln::testing
