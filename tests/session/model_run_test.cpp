// kiln run's run without the CLI: the compiled kernels and the interpreter
// give the same bits and raise the same float status on a square that
// overflows f16, the kernels are timed into msprof's files when asked, and
// the first output that is not finite is named, the loss first.
#include <filesystem>
#include <unistd.h>

#include <gtest/gtest.h>

#include "compiler/codegen/kernel_compiler.h"
#include "ops/op_builder.h"
#include "session/model_run.h"
#include "target/target.h"

namespace kiln::session {
namespace {

namespace fs = std::filesystem;

// y = x * x in f16: 300^2 is past f16's 65504.
Graph square() {
  Graph g("square");
  ValueId x = g.addInput("x", {DType::F16, {4, 8}}, InputRole::Data);
  ops::OpBuilder b(g);
  g.addOutput("y", b.create("Mul", "sq", {x, x}));
  return g;
}

ops::TensorMap inputs(float last) {
  std::vector<float> values(32);
  for (int i = 0; i < 32; ++i)
    values[i] = 0.25f * static_cast<float>(i - 16);
  values.back() = last;
  return {{"x", Tensor::fromFloats(DType::F16, Shape({4, 8}), values)}};
}

codegen::CompiledKernels compiled(const Graph &g) {
  auto target = target::loadTarget("ascend910b");
  EXPECT_TRUE(target.isOk()) << target.message();
  auto kernels = codegen::compileKernels(g, *target, {});
  EXPECT_TRUE(kernels.isOk()) << kernels.message();
  return std::move(*kernels);
}

TEST(ModelRun, KernelsAndInterpreterGiveTheSameBitsAndStatus) {
  const Graph g = square();
  for (float last : {1.5f, 300.0f}) {
    runtime::FloatStatus by_kernels, by_interpreter;
    auto got = runKernels(g, compiled(g), inputs(last), "", by_kernels);
    auto want = runInterpreter(g, inputs(last), OverflowMode::InfNan, by_interpreter);
    ASSERT_TRUE(got.isOk()) << got.message();
    ASSERT_TRUE(want.isOk()) << want.message();
    EXPECT_TRUE(got->at("y") == want->at("y")) << "last input " << last;
    EXPECT_EQ(by_kernels.get() != 0, last > 256) << "last input " << last;
    EXPECT_EQ(by_interpreter.get() != 0, last > 256) << "last input " << last;
    EXPECT_EQ(firstNonFinite(*got), last > 256 ? "'y' is inf" : "");
  }
}

TEST(ModelRun, KernelsAreTimedIntoAProfileFolder) {
  const fs::path dir =
      fs::temp_directory_path() / ("kiln_model_run_" + std::to_string(::getpid())) / "profile";
  fs::remove_all(dir);
  const Graph g = square();
  runtime::FloatStatus status;
  auto got = runKernels(g, compiled(g), inputs(1), dir.string(), status);
  ASSERT_TRUE(got.isOk()) << got.message();
  for (const char *file : {"op_summary.csv", "step_trace.csv"})
    EXPECT_TRUE(fs::exists(dir / file)) << file;
}

TEST(ModelRun, TheLossIsNamedBeforeOtherOutputs) {
  const float inf = std::numeric_limits<float>::infinity();
  ops::TensorMap outputs = {{"a.grad", Tensor::fromFloats(DType::F32, Shape({2}), {1, inf})},
                            {"loss", Tensor::fromFloats(DType::F32, Shape({}), {std::nanf("")})},
                            {"ids", Tensor::fromInts(DType::I64, Shape({1}), {7})}};
  EXPECT_EQ(firstNonFinite(outputs), "'loss' is nan");
  outputs.erase("loss");
  EXPECT_EQ(firstNonFinite(outputs), "'a.grad' is inf");
}

} // namespace
} // namespace kiln::session
