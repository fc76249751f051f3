// What the compiler hands the runtime: the kernels a compile gives, read
// through executable::Executable alone, agree with the compile's own record.
#include <gtest/gtest.h>

#include "compiler/codegen/kernel_compiler.h"
#include "executable/executable.h"
#include "ops/op_builder.h"
#include "target/target.h"

namespace kiln::executable {
namespace {

// Two identical chains of two ops; no pass ran, so each op is a kernel of
// its own: four kernels, two distinct.
Graph twoAlikeChains() {
  Graph g("alike");
  ops::OpBuilder b(g);
  for (const char *name : {"a", "b"}) {
    ValueId x = g.addInput(std::string("x") + name, {DType::F32, {4, 8}}, InputRole::Data);
    ValueId y = b.create("Exp", std::string("exp_") + name, {x});
    g.addOutput(std::string("y") + name, b.create("Neg", std::string("neg_") + name, {y}));
  }
  EXPECT_TRUE(b.status().isOk()) << b.status().message();
  return g;
}

TEST(Executable, DistinctKernelsAreTheCompilesUniqueOnes) {
  const Graph g = twoAlikeChains();
  auto target = target::loadTarget("ascend910b");
  ASSERT_TRUE(target) << target.message();
  codegen::KernelCompileOptions options;
  options.compile_objects = false; // a plan: objects are not needed to count them
  auto compiled = codegen::compileKernels(g, *target, options);
  ASSERT_TRUE(compiled) << compiled.message();
  const Executable &runs = *compiled; // the runtime's view
  EXPECT_EQ(static_cast<int64_t>(runs.kernels.size()), compiled->stats.total);
  EXPECT_EQ(runs.distinctKernels(), compiled->stats.unique);
  EXPECT_EQ(runs.kernels.size(), 4u);
  EXPECT_EQ(runs.distinctKernels(), 2);
  for (const CompiledKernel &k : runs.kernels) {
    EXPECT_GT(k.launch.rows, 0) << k.spec.name;
    EXPECT_EQ(k.launch.row_sums.size(), k.spec.outputs.size()) << k.spec.name;
  }
}

} // namespace
} // namespace kiln::executable
