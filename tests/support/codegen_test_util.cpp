#include "tests/support/codegen_test_util.h"

#include <cmath>
#include <optional>
#include <sstream>

#include "compiler/codegen/kernel_builder.h"
#include "compiler/codegen/kernel_compiler.h"
#include "compiler/codegen/object_compiler.h"
#include "ir/float_status.h"
#include "ir/tensor_compare.h"
#include "ops/op_builder.h"
#include "runtime/executor.h"
#include "target/target.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

double defaultRtol(DType dtype) {
  switch (dtype) {
  case DType::F16:
    return 2e-3;
  case DType::BF16:
    return 1.6e-2;
  default:
    return 1e-5;
  }
}

} // namespace

std::string compareTensors(const Tensor &got, const Tensor &want, double rtol, double atol) {
  return firstMismatch(got, want, rtol, atol);
}

ops::TensorMap randomInputs(const Graph &graph, uint64_t seed, float lo, float hi,
                            int64_t int_bound) {
  ops::TensorMap inputs;
  for (const GraphInput &in : graph.inputs()) {
    const TensorType &t = graph.type(in.value);
    inputs[in.name] =
        isFloat(t.dtype) ? randomTensor(t, seed++, lo, hi) : randomIndices(t, seed++, int_bound);
  }
  return inputs;
}

std::unique_ptr<runtime::Executor> compiledExecutor(const Graph &graph, const std::string &target,
                                                    OverflowMode overflow) {
  auto loaded = target::loadTarget(target);
  EXPECT_TRUE(loaded.isOk()) << (loaded ? "" : loaded.message());
  if (!loaded)
    return nullptr;
  codegen::KernelCompileOptions compile;
  compile.object.overflow = overflow;
  auto kernels = codegen::compileKernels(graph, *loaded, compile);
  EXPECT_TRUE(kernels.isOk()) << (kernels ? "" : kernels.message());
  if (!kernels)
    return nullptr;
  auto executor = runtime::Executor::create(graph, std::move(*kernels));
  EXPECT_TRUE(executor.isOk()) << (executor ? "" : executor.message());
  return executor ? std::move(*executor) : nullptr;
}

std::string kernelIr(const Graph &graph) {
  auto target = target::loadTarget("ascend910b");
  EXPECT_TRUE(target.isOk());
  if (!target)
    return {};
  auto kernels = codegen::compileKernels(graph, *target, {});
  EXPECT_TRUE(kernels.isOk()) << kernels.message();
  if (!kernels.isOk() || kernels->kernels.size() != 1) {
    ADD_FAILURE() << "one kernel expected";
    return {};
  }
  auto build = codegen::buildKernel(graph, kernels->kernels[0].spec);
  EXPECT_TRUE(build.isOk()) << build.message();
  std::string ir;
  EXPECT_TRUE(build.isOk() &&
              codegen::compileKernelObject(build->program, "kernel", {}, &ir).isOk());
  return ir;
}

ops::TensorMap expectCompiledMatchesReference(const Graph &graph, const ops::TensorMap &inputs,
                                              const CompareOptions &options) {
  std::unique_ptr<runtime::Executor> executor =
      compiledExecutor(graph, options.target, options.overflow);
  if (!executor)
    return {};
  runtime::FloatStatus status;
  auto got = executor->run(inputs, nullptr, &status);
  EXPECT_TRUE(got.isOk()) << (got ? "" : got.message());
  ops::InterpretOptions reference;
  reference.overflow = options.overflow;
  takeFloatStatus();
  auto want = ops::interpret(graph, inputs, reference);
  const bool want_overflow = takeFloatStatus() != 0;
  EXPECT_TRUE(want.isOk()) << (want ? "" : want.message());
  if (!got || !want)
    return {};
  // The kernels raise the float status exactly where the reference rounding does.
  EXPECT_EQ(status.overflowed(), want_overflow) << "the float status of graph " << graph.name();
  for (const auto &[name, w] : *want) {
    const double rtol = options.rtol >= 0 ? options.rtol : defaultRtol(w.dtype());
    const double atol = options.atol >= 0 ? options.atol : rtol;
    std::string mismatch = compareTensors(got->at(name), w, rtol, atol);
    EXPECT_TRUE(mismatch.empty()) << "output '" << name << "': " << mismatch;
  }
  return std::move(*got);
}

namespace {

// A graph of one `op` node whose inputs are named in_0, in_1, ... and
// outputs out_0, out_1, ...; empty (and a test failure) when the op refuses.
std::optional<Graph>
oneOpGraph(const std::string &op, const std::vector<TensorType> &inputs, const AttrMap &attrs,
           const std::shared_ptr<const ops::OpRegistry> &vocabulary = nullptr) {
  Graph g("op_" + op);
  g.setVocabulary(vocabulary);
  std::vector<ValueId> args;
  for (size_t i = 0; i < inputs.size(); ++i)
    args.push_back(g.addInput("in_" + std::to_string(i), inputs[i], InputRole::Data));
  ops::OpBuilder b(g);
  auto outs = b.tryCreate(op, "op", args, attrs);
  EXPECT_TRUE(outs.isOk()) << outs.message();
  if (!outs)
    return std::nullopt;
  for (size_t k = 0; k < outs->size(); ++k)
    g.addOutput("out_" + std::to_string(k), (*outs)[k]);
  return g;
}

} // namespace

void expectOpMatchesReference(const std::string &op, const std::vector<TensorType> &inputs,
                              const AttrMap &attrs, const CompareOptions &options, uint64_t seed,
                              const std::shared_ptr<const ops::OpRegistry> &vocabulary) {
  std::optional<Graph> g = oneOpGraph(op, inputs, attrs, vocabulary);
  if (!g)
    return;
  SCOPED_TRACE(op);
  expectCompiledMatchesReference(*g, randomInputs(*g, seed), options);
}

void expectOpOnInputs(const std::string &op, const std::vector<Tensor> &inputs,
                      const AttrMap &attrs, const CompareOptions &options) {
  std::vector<TensorType> types;
  ops::TensorMap feed;
  for (size_t i = 0; i < inputs.size(); ++i) {
    types.push_back(inputs[i].type());
    feed["in_" + std::to_string(i)] = inputs[i];
  }
  std::optional<Graph> g = oneOpGraph(op, types, attrs);
  if (!g)
    return;
  SCOPED_TRACE(op);
  expectCompiledMatchesReference(*g, feed, options);
}

} // namespace kiln::testing
