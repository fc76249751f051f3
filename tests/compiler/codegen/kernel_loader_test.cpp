// The kernel loader's perf map: with KILN_PERF_MAP=1 every loaded kernel is
// listed in /tmp/perf-PID.map with its address, the size of its code and
// its label, which is what `perf report` needs to name JIT samples.
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <unistd.h>

#include "compiler/codegen/kernel_compiler.h"
#include "kernels/kernel_loader.h"
#include "ops/op_builder.h"
#include "target/target.h"

namespace kiln::testing {
namespace {

TEST(KernelLoader, PerfMapListsEveryLoadedKernelWithItsSize) {
  Graph g("perf_map");
  ValueId x = g.addInput("x", {DType::F32, {64, 32}}, InputRole::Data);
  ops::OpBuilder b(g);
  g.addOutput("y", b.create("Exp", "exp", {x}));
  auto target = target::loadTarget("ascend910b");
  ASSERT_TRUE(target.isOk());
  auto compiled = codegen::compileKernels(g, *target, {});
  ASSERT_TRUE(compiled.isOk()) << compiled.message();
  const codegen::CompiledKernel &kernel = compiled->kernels.front();

  const std::string map = "/tmp/perf-" + std::to_string(getpid()) + ".map";
  std::remove(map.c_str());
  setenv("KILN_PERF_MAP", "1", 1);
  auto loader = kernels::KernelLoader::create();
  unsetenv("KILN_PERF_MAP");
  ASSERT_TRUE(loader.isOk()) << loader.message();
  auto entry = (*loader)->load(compiled->objects[kernel.object], kernel.symbol, "perf_map.exp");
  ASSERT_TRUE(entry.isOk()) << entry.message();

  std::ifstream in(map);
  ASSERT_TRUE(in) << map;
  std::string address, size, name;
  in >> address >> size >> name;
  EXPECT_EQ(name, "kiln:perf_map.exp");
  EXPECT_EQ(std::stoull(address, nullptr, 16), reinterpret_cast<uintptr_t>(*entry));
  EXPECT_GT(std::stoull(size, nullptr, 16), 16u) << "the size of the kernel's code";
  std::remove(map.c_str());
}

} // namespace
} // namespace kiln::testing
