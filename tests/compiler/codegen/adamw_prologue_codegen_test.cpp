// AdamWPrologueFusionPass on the update program: each parameter's gradient
// scale (and its cast to a 16-bit parameter's dtype) joins its AdamW kernel,
// and so does the cast that writes a weight's compute copy; the compiled
// update is the same bits as with the pass off, and matches the interpreter.
#include <gtest/gtest.h>

#include "compiler/autodiff/training_step.h"
#include "tests/support/codegen_test_util.h"
#include "tests/support/pass_test_util.h"

namespace kiln::testing {
namespace {

Graph updateProgram(const std::map<std::string, DType> &copies = {}) {
  auto g = autodiff::buildOptimizerStep(
      {{"w", TensorType{DType::F32, {8, 33}}}, {"h", TensorType{DType::BF16, {5, 7}}}}, {}, copies);
  EXPECT_TRUE(g) << g.message();
  return std::move(*g);
}

ops::TensorMap updateInputs(const Graph &update) {
  ops::TensorMap feed = randomInputs(update, 3, 0.5f, 2.0f); // v >= 0: a velocity
  feed["grad_scale"] = Tensor::scalar(DType::F32, 0.25);
  feed["adam.step"] = Tensor::scalar(DType::I64, 3);
  return feed;
}

TEST(AdamWPrologueFusion, TheGradientScaleAndCastJoinTheUpdate) {
  Graph fused = updateProgram(), plain = updateProgram();
  runPasses(fused, contextFor("ascend910b"));
  runPasses(plain, contextFor("ascend910b", {switchPasses({{"AdamWPrologueFusionPass", false}})}));
  for (const char *adam : {"w.adamw", "h.adamw"}) {
    const NodeId id = fused.findNode(adam);
    ASSERT_NE(id, kNoNode) << adam;
    ASSERT_NE(fused.node(id).group, kNoGroup) << adam;
    EXPECT_EQ(fused.group(fused.node(id).group).kernel, "adamw");
  }
  EXPECT_EQ(groupMemberNames(fused, "h.adamw"),
            (std::vector<std::string>{"h.grad", "h.grad_cast", "h.adamw"}));
  EXPECT_EQ(plain.node(plain.findNode("w.adamw")).group, kNoGroup);

  const ops::TensorMap feed = updateInputs(fused);
  const ops::TensorMap a = expectCompiledMatchesReference(fused, feed);
  const ops::TensorMap b = expectCompiledMatchesReference(plain, feed);
  for (const auto &[name, t] : b)
    EXPECT_TRUE(a.at(name) == t) << name << ": the fused update changed bits";
}

TEST(AdamWPrologueFusion, TheComputeCopysCastJoinsTheUpdate) {
  Graph fused = updateProgram({{"w", DType::BF16}}), plain = updateProgram({{"w", DType::BF16}});
  runPasses(fused, contextFor("ascend910b"));
  runPasses(plain, contextFor("ascend910b", {switchPasses({{"AdamWPrologueFusionPass", false}})}));
  EXPECT_EQ(groupMemberNames(fused, "w.adamw"),
            (std::vector<std::string>{"w.grad", "w.adamw", "w.compute_copy"}));
  const GraphInput *old_copy = fused.findInput(autodiff::weightCopyName("w"));
  ASSERT_NE(old_copy, nullptr) << "the old copy is handed over, to be written over";
  EXPECT_EQ(old_copy->role, InputRole::WeightCopy);
  ASSERT_NE(fused.findOutput(autodiff::weightCopyName("w")), nullptr);

  const ops::TensorMap feed = updateInputs(fused);
  const ops::TensorMap a = expectCompiledMatchesReference(fused, feed);
  const ops::TensorMap b = expectCompiledMatchesReference(plain, feed);
  for (const auto &[name, t] : b)
    EXPECT_TRUE(a.at(name) == t) << name << ": the fused update changed bits";
  // The copy is the new weight rounded to bf16, as a Cast of it would be.
  EXPECT_TRUE(a.at(autodiff::weightCopyName("w")) == a.at("w").castTo(DType::BF16));
}

} // namespace
} // namespace kiln::testing
