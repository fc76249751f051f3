// The profile's GEMM floor: a step's matmul FLOPs at the host's best GEMM
// rate, the better of the measurement before the run and the one after it,
// so a measurement disturbed by a burst on a shared host does not make
// every ratio against it wrong.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "ops/op_builder.h"
#include "runtime/executor.h"
#include "runtime/profiler.h"
#include "tests/support/codegen_test_util.h"
#include "tests/support/scratch_dir.h"

namespace kiln {
namespace {

TEST(HostRoofline, KeepBestTakesEachCeilingsHigherMeasurement) {
  runtime::HostRoofline a;
  a.gemm_flops_per_s = 5;
  a.bytes_per_s = 1;
  a.best_f32_gemm_flops_per_s = 3;
  a.best_bf16_gemm_flops_per_s = 0; // no bf16 units seen
  runtime::HostRoofline b;
  b.gemm_flops_per_s = 4;
  b.bytes_per_s = 2;
  b.best_f32_gemm_flops_per_s = 6;
  b.best_bf16_gemm_flops_per_s = 9;
  a.keepBest(b);
  EXPECT_EQ(a.gemm_flops_per_s, 5);
  EXPECT_EQ(a.bytes_per_s, 2);
  EXPECT_EQ(a.best_f32_gemm_flops_per_s, 6);
  EXPECT_EQ(a.best_bf16_gemm_flops_per_s, 9);
}

TEST(HostRoofline, Bf16OperandsTakeTheF32RateWithoutBf16Units) {
  runtime::HostRoofline r;
  r.best_f32_gemm_flops_per_s = 3;
  EXPECT_EQ(r.bestGemmRate(DType::BF16), 3);
  r.best_bf16_gemm_flops_per_s = 7;
  EXPECT_EQ(r.bestGemmRate(DType::BF16), 7);
  EXPECT_EQ(r.bestGemmRate(DType::F32), 3);
}

// The one step's "GEMM Floor(us)" of the profile in `dir`.
double floorMicros(const std::filesystem::path &dir) {
  std::ifstream in(dir / "step_trace.csv");
  std::string header, row;
  EXPECT_TRUE(std::getline(in, header) && std::getline(in, row));
  std::istringstream cells(row);
  std::string cell;
  while (std::getline(cells, cell, ','))
    ;
  return std::stod(cell); // the last column
}

TEST(ProfilerFloor, IsAgainstTheBetterOfTheMeasurements) {
  Graph g("floor");
  ValueId x = g.addInput("x", {DType::F32, {64, 32}}, InputRole::Data);
  ValueId w = g.addInput("w", {DType::F32, {32, 16}}, InputRole::Parameter);
  ops::OpBuilder b(g);
  g.addOutput("y", b.create("MatMul", "mm", {x, w}));
  ASSERT_TRUE(b.status()) << b.status().message();
  std::unique_ptr<runtime::Executor> executor = testing::compiledExecutor(g);
  ASSERT_TRUE(executor);

  runtime::HostRoofline before; // a burst slowed the measurement: 1 GFLOP/s
  before.best_f32_gemm_flops_per_s = 1e9;
  runtime::Profiler profiler(before);
  const int program = profiler.addProgram("run", g, executor->kernels());
  executor->profileInto({&profiler, program, 1, {0}});
  const auto start = runtime::Profiler::Clock::now();
  ASSERT_TRUE(executor->run(testing::randomInputs(g, 1)));
  profiler.stepTime(1, start, runtime::Profiler::Clock::now());

  const auto dir = testing::freshTestDir("kiln_profiler_floor_");
  const double flops = 2.0 * 64 * 16 * 32;
  ASSERT_TRUE(profiler.write(dir.string()));
  EXPECT_NEAR(floorMicros(dir), 1e6 * flops / 1e9, 1e-3);

  runtime::HostRoofline after; // the host at its best: twice the rate
  after.best_f32_gemm_flops_per_s = 2e9;
  profiler.keepBestRoofline(after);
  ASSERT_TRUE(profiler.write(dir.string()));
  EXPECT_NEAR(floorMicros(dir), 1e6 * flops / 2e9, 1e-3);

  runtime::HostRoofline busy; // a slower measurement changes nothing
  busy.best_f32_gemm_flops_per_s = 0.5e9;
  profiler.keepBestRoofline(busy);
  ASSERT_TRUE(profiler.write(dir.string()));
  EXPECT_NEAR(floorMicros(dir), 1e6 * flops / 2e9, 1e-3);
  std::filesystem::remove_all(dir);
}

} // namespace
} // namespace kiln
