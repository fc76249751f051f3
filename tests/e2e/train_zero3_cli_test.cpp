// kiln train --zero 3 on the tiny Qwen: each weight a flat slice per
// replica, gathered before use. DP8, DP8 with full recomputation and TP2 x
// DP4 train as one device does (the loss within 1e-5, the final weights
// within 1e-4), each device's measured peak is its plan to the byte; a resumed run ends as the
// unbroken one; two MPI processes of four devices give one process's bits; the Qwen-14B plan is the
// formula's within 15 % and fits a 64 GiB ascend910b.
#include <regex>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/train_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using nlohmann::json;

class Zero3Cli : public TrainCli {
protected:
  std::vector<json> trainAs(const std::string &name, const std::string &flags) {
    Result r = runCheckpointed(train(flags), name);
    const auto [measured, planned] = measuredAndPlannedBytes(r.out);
    EXPECT_GT(measured, 0) << name << ": " << r.out;
    EXPECT_EQ(measured, planned) << name << ": " << r.out;
    return logLines(name + ".jsonl");
  }
};

TEST_F(Zero3Cli, SlicedWeightsTrainAsOneDevice) {
  const std::vector<json> one = trainAs("one", "--devices 1");
  ASSERT_EQ(one.size(), 20u);
  for (const auto &[name, flags] : std::vector<std::pair<std::string, std::string>>{
           {"dp8", "--devices 8 --zero 3"},
           {"dp8full", "--devices 8 --zero 3 --recompute full"},
           {"tp2dp4", "--devices 8 --tp 2 --zero 3"}}) {
    const std::vector<json> got = trainAs(name, flags);
    ASSERT_EQ(got.size(), 20u) << name;
    for (size_t i = 0; i < one.size(); ++i) {
      const double w = one[i]["loss"];
      EXPECT_NEAR(got[i]["loss"].get<double>(), w, 1e-5 * w) << name << " step " << i + 1;
    }
    expectNearTensors("one/step-000020.safetensors", name + "/step-000020.safetensors", 1e-4);
  }
  fs::create_directories(dir_ / "resumed");
  fs::copy_file(dir_ / "dp8" / "step-000010.safetensors",
                dir_ / "resumed" / "step-000010.safetensors");
  Result resumed = run(train("--steps 20 --devices 8 --zero 3 --checkpoint-dir resumed --resume"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  expectSameTensors("dp8/step-000020.safetensors", "resumed/step-000020.safetensors");
  expectUsageError(run(train("--steps 1 --devices 4 --pp 2 --zero 3")),
                   {"--zero 3 with --pp 2", "not built"});
}

// Each process gathers the other's slices after every update (the
// all-gather): two processes of four devices match one of eight bit for bit.
TEST_F(Zero3Cli, TwoMpiProcessesOfFourMatchOneOfEight) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "OpenMPI's mpirun is not installed";
  const std::string flags = "--steps 4 --devices 8 --zero 3 --checkpoint-every 4 ";
  ASSERT_EQ(run(train(flags + "--log-json one.jsonl --checkpoint-dir one")).exit_code, 0);
  Result mpi = shell("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun "
                     "--oversubscribe -np 2 " +
                     kiln_ + " " +
                     train(flags + "--devices-per-process 4 --log-json mpi.jsonl "
                                   "--checkpoint-dir mpi"));
  if (mpi.exit_code != 0 && mpi.err.find("built without MPI") != std::string::npos)
    GTEST_SKIP() << "kiln was built without MPI";
  ASSERT_EQ(mpi.exit_code, 0) << mpi.err;
  std::vector<json> one = logLines("one.jsonl"), two = logLines("mpi.jsonl");
  ASSERT_EQ(two.size(), 4u);
  expectSameLog(one, two);
  expectSameTensors("one/step-000004.safetensors", "mpi/step-000004.safetensors");
}

// The layout: Qwen-14B, seq 2048, f16, 8 data-parallel devices with
// ZeRO-3 and full recomputation.
TEST_F(Zero3Cli, Qwen14BPlanIsTheFormulasAndFits64GiB) {
  Result r = run("train " + k14b +
                 " --compile-only --seq 2048 --dtype f16 --target ascend910b --device-memory "
                 "64GiB --devices 8 --zero 3 --recompute full --batch 8");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  std::smatch peak, formula;
  ASSERT_TRUE(std::regex_search(r.out, peak, std::regex("per device: peak ([0-9.]+ GiB)")))
      << r.out;
  ASSERT_TRUE(std::regex_search(r.out, formula, std::regex("= ([0-9.]+ GiB)\n"))) << r.out;
  const double plan = formattedBytes(peak[1]), paper = formattedBytes(formula[1]);
  EXPECT_LT(std::abs(plan - paper), 0.15 * paper) << r.out;
  EXPECT_NE(r.out.find("device 64.0 GiB: fits"), std::string::npos) << r.out;
}

} // namespace
} // namespace kiln
