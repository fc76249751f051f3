// One default model dtype in every command (f32 unless --dtype, the job file
// or a precision mode says otherwise), and banners that state what a compile
// or a training run was made with: target, dtype, precision mode and
// recomputation.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/train_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;

class DefaultsCli : public TrainCli {};

// What kiln compile built, kiln run finds in the kernel cache: the same
// program, so not one kernel misses.
TEST_F(DefaultsCli, RunOfACompiledModelCompilesNothingAgain) {
  ASSERT_EQ(run("init " + kTiny + " -o w.safetensors").exit_code, 0);
  ASSERT_EQ(run("make-inputs " + kTiny + " --batch 2 --seq 8 -o i.safetensors").exit_code, 0);
  Result compiled = run("compile " + kTiny + " --training --batch 2 --seq 8");
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  Result ran = run("run " + kTiny + " --training --weights w.safetensors --inputs i.safetensors " +
                   "--outputs o.safetensors --explain-cache-misses");
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(ran.err.find("cache miss"), std::string::npos) << ran.err;
}

TEST_F(DefaultsCli, CompileBannerStatesTargetDtypePrecisionAndRecomputation) {
  Result r = run("compile " + kTiny + " --training --seq 8 --recompute selective");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("for ascend910b (f32 model, precision must_keep_origin_dtype, recompute "
                       "selective)"),
            std::string::npos)
      << r.out;
  Result f16 = run("compile " + kTiny + " --seq 8 --dtype f16 --target ascend910");
  ASSERT_EQ(f16.exit_code, 0) << f16.err;
  EXPECT_NE(f16.out.find("for ascend910 (f16 model, precision must_keep_origin_dtype, recompute "
                         "none)"),
            std::string::npos)
      << f16.out;
}

TEST_F(DefaultsCli, TrainBannersStateTargetDtypePrecisionAndRecomputation) {
  Result plan = run("train " + kTiny + " --compile-only --recompute full");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_NE(plan.out.find("seq 32; ascend910b, f32 model, precision must_keep_origin_dtype, "
                          "recompute full\n"),
            std::string::npos)
      << plan.out;
  Result trained = run(train("--steps 1 --devices 2 --dtype f16 --loss-scale fixed:1024"));
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  EXPECT_NE(trained.out.find("seq 16; ascend910b, f16 model, precision must_keep_origin_dtype, "
                             "recompute none; per device: peak"),
            std::string::npos)
      << trained.out;
}

// kiln plan plans what kiln train runs: the same default dtype, printed in
// the command it suggests.
TEST_F(DefaultsCli, PlanPlansTheDtypeTrainDefaultsTo) {
  Result r = run("plan " + kTiny + " --global-batch 8 --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string command = nlohmann::json::parse(r.out)["command"].get<std::string>();
  EXPECT_NE(command.find("--dtype f32"), std::string::npos) << command;
}

} // namespace
} // namespace kiln
