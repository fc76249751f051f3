// The float status of generated kernels: a kernel raises it where its
// rounding overflows (saturation: a clamp or NaN -> 0; INFNAN: an inf or NaN
// result), in every float dtype and both modes, elementwise and in a GEMM's
// epilogue; in-range results leave it clear. expectCompiledMatchesReference
// also checks that the reference rounding (ir/float16.cpp) agrees.
#include <gtest/gtest.h>

#include "compiler/codegen/kernel_compiler.h"
#include "ops/op_builder.h"
#include "runtime/executor.h"
#include "target/target.h"
#include "tests/support/codegen_test_util.h"

namespace kiln::testing {
namespace {

// Whether running `graph` compiled on `inputs` raised the status.
bool raises(const Graph &graph, const ops::TensorMap &inputs, OverflowMode mode) {
  CompareOptions options;
  options.overflow = mode;
  expectCompiledMatchesReference(graph, inputs, options);
  auto target = target::loadTarget("ascend910b");
  codegen::KernelCompileOptions compile;
  compile.object.overflow = mode;
  auto kernels = codegen::compileKernels(graph, *target, compile);
  EXPECT_TRUE(kernels.isOk()) << (kernels ? "" : kernels.message());
  auto executor = runtime::Executor::create(graph, std::move(*kernels));
  EXPECT_TRUE(executor.isOk());
  runtime::FloatStatus status;
  EXPECT_TRUE((*executor)->run(inputs, nullptr, &status).isOk());
  return status.overflowed();
}

Graph mulGraph(DType dtype) {
  Graph g("mul");
  ops::OpBuilder b(g);
  ValueId x = g.addInput("x", {dtype, {4, 33}}, InputRole::Data);
  ValueId y = g.addInput("y", {dtype, {4, 33}}, InputRole::Data);
  g.addOutput("z", b.create("Mul", "mul", {x, y}));
  return g;
}

ops::TensorMap filled(const Graph &g, float value) {
  ops::TensorMap inputs;
  for (const GraphInput &in : g.inputs()) {
    const TensorType &t = g.type(in.value);
    inputs[in.name] =
        Tensor::fromFloats(t.dtype, t.shape, std::vector<float>(numElements(t.shape), value));
  }
  return inputs;
}

TEST(FloatStatusCodegen, AnOverflowingProductRaisesItInEveryDtypeAndMode) {
  // x * x past each dtype's range: 300^2 > 65504, 1e20^2 > 3.4e38.
  const std::pair<DType, float> cases[] = {
      {DType::F16, 300.0f}, {DType::BF16, 1e20f}, {DType::F32, 1e20f}};
  for (OverflowMode mode : {OverflowMode::Saturation, OverflowMode::InfNan})
    for (const auto &[dtype, big] : cases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + std::string(overflowModeName(mode)));
      const Graph g = mulGraph(dtype);
      EXPECT_TRUE(raises(g, filled(g, big), mode));
      EXPECT_FALSE(raises(g, filled(g, 2.0f), mode));
    }
}

TEST(FloatStatusCodegen, AGemmEpilogueRaisesIt) {
  for (OverflowMode mode : {OverflowMode::Saturation, OverflowMode::InfNan}) {
    Graph g("matmul");
    ops::OpBuilder b(g);
    ValueId a = g.addInput("a", {DType::F16, {8, 64}}, InputRole::Data);
    ValueId w = g.addInput("w", {DType::F16, {64, 16}}, InputRole::Data);
    g.addOutput("c", b.create("MatMul", "mm", {a, w}));
    // 64 * 40 * 40 = 102400 > 65504.
    EXPECT_TRUE(raises(g, filled(g, 40.0f), mode)) << overflowModeName(mode);
    EXPECT_FALSE(raises(g, filled(g, 1.0f), mode)) << overflowModeName(mode);
  }
}

// A lone matmul with an f32 result: the runtime has oneDNN write the output
// and checks it for inf and NaN itself (KernelLaunch::output_is_accumulator),
// one block per thread, a batch too; the status and the values are the
// epilogue's (the reference's, and in saturation mode the epilogue runs).
TEST(FloatStatusCodegen, ALoneF32MatmulRaisesItWithoutAnEpilogue) {
  for (DType in : {DType::F32, DType::BF16})
    for (const Shape &a_shape : {Shape{40, 64}, Shape{3, 40, 64}}) {
      Graph g("matmul");
      ops::OpBuilder b(g);
      ValueId a = g.addInput("a", {in, a_shape}, InputRole::Data);
      ValueId w = g.addInput("w", {in, {64, 24}}, InputRole::Data);
      ValueId c = b.create(a_shape.size() == 3 ? "BatchMatMul" : "MatMul", "mm",
                           {a, a_shape.size() == 3 ? b.create("BroadcastTo", "wb", {w},
                                                              {{"shape", Shape{3, 64, 24}}})
                                                   : w});
      g.addOutput("c",
                  in == DType::F32 ? c : b.create("Cast", "c32", {c}, {{"dtype", DType::F32}}));
      auto target = target::loadTarget("ascend910b");
      auto kernels = codegen::compileKernels(g, *target, {});
      ASSERT_TRUE(kernels.isOk()) << kernels.message();
      bool direct = false;
      for (const codegen::CompiledKernel &k : kernels->kernels)
        direct |= k.launch.output_is_accumulator;
      if (in == DType::F32 && a_shape.size() == 2) {
        EXPECT_TRUE(direct) << "a lone f32 MatMul stores its result as it is";
      }
      for (OverflowMode mode : {OverflowMode::Saturation, OverflowMode::InfNan}) {
        SCOPED_TRACE(std::string(dtypeName(in)) + " rank " + std::to_string(a_shape.size()) + " " +
                     std::string(overflowModeName(mode)));
        // 64 products of 1e19 x 1e19 overflow f32; 1 x 1 do not.
        EXPECT_TRUE(raises(g, filled(g, 1e19f), mode));
        EXPECT_FALSE(raises(g, filled(g, 1.0f), mode));
      }
    }
}

TEST(FloatStatusCodegen, ANanInputRaisesItAndSaturationStoresZero) {
  const Graph g = mulGraph(DType::F16);
  ops::TensorMap inputs = filled(g, 1.0f);
  inputs["x"].setFloat(5, std::nanf(""), OverflowMode::InfNan);
  EXPECT_TRUE(raises(g, inputs, OverflowMode::Saturation));
  EXPECT_TRUE(raises(g, inputs, OverflowMode::InfNan));
}

} // namespace
} // namespace kiln::testing
