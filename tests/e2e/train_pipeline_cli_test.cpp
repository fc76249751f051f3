// kiln train --pp on a four-layer tiny Qwen: 2 and 4 pipeline stages, with
// data and tensor parallelism, ZeRO and recomputation, train as one device
// does (the loss and gradient norm within 1e-5, the final weights within
// 1e-4), each run's measured device peak is its plan, a resumed run ends as
// an unbroken one, MPI processes (holding whole pipelines, or a pipeline's
// stages apart) match one process, the trace shows the 1F1B schedule, and
// bad layouts are clear errors.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/train_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using nlohmann::json;

class PipelineCli : public TrainCli {
protected:
  void SetUp() override {
    TrainCli::SetUp();
    json config = json::parse(slurp(kTiny));
    config["num_hidden_layers"] = 4;
    write("tiny4.json", config.dump());
  }
  std::string train4(const std::string &flags) {
    return "train " + path("tiny4.json") + " --data train.bin --batch 8 --seq 16 --lr 1e-3 " +
           flags;
  }
  // A 20-step run checkpointed at 10 and 20; its log.
  std::vector<json> trainAs(const std::string &name, const std::string &flags) {
    Result r = runCheckpointed(train4(flags), name);
    const auto [measured, planned] = measuredAndPlannedPeak(r.out);
    expectMeasuredPeakIsPlan(r.out, name);
    EXPECT_EQ(measured, planned) << name << ": " << r.out;
    return logLines(name + ".jsonl");
  }
};

TEST_F(PipelineCli, StagesTrainAsOneDevice) {
  const std::vector<json> one = trainAs("one", "--devices 1");
  ASSERT_EQ(one.size(), 20u);
  for (const auto &[name, flags] : std::vector<std::pair<std::string, std::string>>{
           {"pp2", "--devices 2 --pp 2 --micro-batches 4"},
           {"pp4", "--devices 4 --pp 4 --micro-batches 8"},
           {"pp2dp2tp2", "--devices 8 --pp 2 --tp 2 --micro-batches 2"},
           {"pp2z1", "--devices 4 --pp 2 --zero 1 --micro-batches 2"},
           {"pp2full", "--devices 2 --pp 2 --recompute full --micro-batches 4"}}) {
    const std::vector<json> got = trainAs(name, flags);
    ASSERT_EQ(got.size(), 20u) << name;
    expectNearLog(one, got, 1e-5, name);
    expectNearTensors("one/step-000020.safetensors", name + "/step-000020.safetensors", 1e-4);
  }
  EXPECT_LT(one.back()["loss"].get<double>(), one.front()["loss"].get<double>() - 0.05);

  // Resumed from the pipeline's checkpoint of step 10, the run ends exactly
  // where the unbroken one did.
  fs::create_directories(dir_ / "resumed");
  fs::copy_file(dir_ / "pp2z1" / "step-000010.safetensors",
                dir_ / "resumed" / "step-000010.safetensors");
  Result resumed = run(train4("--steps 20 --devices 4 --pp 2 --zero 1 --micro-batches 2 "
                              "--checkpoint-dir resumed --resume"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  expectSameTensors("pp2z1/step-000020.safetensors", "resumed/step-000020.safetensors");
}

// A LoRA fine-tune: each adapter (PEFT's name, "base_model.model.
// transformer.h.<i>...") lives on its layer's stage; the pipeline trains as
// one device running the same micro-batches. Not bit for bit on every host:
// where the stage cut falls the kernels are cut too, so a GEMM can be tiled
// differently, and some BLAS kernels (OpenBLAS's Haswell sgemm, which it
// picks on AMD Zen 5) sum a tile's products in an order that depends on the
// tile (2e-9 apart in the gradient norm there; equal bits on its SkylakeX
// kernel).
TEST_F(PipelineCli, ALoraFineTunePipelinesAsOneDevice) {
  const std::string lora = "--steps 3 --lora-rank 4 --micro-batches 2 ";
  ASSERT_EQ(run(train4(lora + "--devices 1 --log-json one.jsonl")).exit_code, 0);
  Result pp = run(train4(lora + "--devices 2 --pp 2 --log-json pp.jsonl"));
  ASSERT_EQ(pp.exit_code, 0) << pp.err;
  std::vector<json> one = logLines("one.jsonl"), two = logLines("pp.jsonl");
  ASSERT_EQ(two.size(), 3u);
  for (size_t i = 0; i < one.size(); ++i)
    for (const char *field : {"loss", "grad_norm"}) {
      const double want = one[i][field].get<double>();
      EXPECT_NEAR(two[i][field].get<double>(), want, 1e-7 * want) << field << " step " << i + 1;
    }
}

// Under MPI: processes each holding a whole pipeline, and a pipeline whose
// stages live in two processes (activations and gradients sent between
// them), give one process's losses and checkpoints bit for bit; a run
// resumed across the two processes ends as the unbroken one.
TEST_F(PipelineCli, MpiProcessesMatchOne) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "OpenMPI's mpirun is not installed";
  const std::string mpirun = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun "
                             "--oversubscribe -np 2 " +
                             kiln_ + " ";
  for (const auto &[name, flags] : std::vector<std::pair<std::string, std::string>>{
           {"whole", "--devices 4 --pp 2 --zero 1 --micro-batches 2 --devices-per-process 2"},
           {"split", "--devices 2 --pp 2 --micro-batches 4 --devices-per-process 1"}}) {
    const std::string run_flags = "--steps 4 --checkpoint-every 2 " + flags;
    const std::string one_flags = run_flags.substr(0, run_flags.find(" --devices-per-process"));
    ASSERT_EQ(
        run(train4(one_flags + " --log-json one.jsonl --checkpoint-dir one-" + name)).exit_code, 0);
    Result mpi =
        shell(mpirun + train4(run_flags + " --log-json mpi.jsonl --checkpoint-dir mpi-" + name));
    if (mpi.exit_code != 0 && mpi.err.find("built without MPI") != std::string::npos)
      GTEST_SKIP() << "kiln was built without MPI";
    ASSERT_EQ(mpi.exit_code, 0) << name << ": " << mpi.err;
    std::vector<json> one = logLines("one.jsonl"), two = logLines("mpi.jsonl");
    ASSERT_EQ(two.size(), 4u) << name << ": one process writes the log";
    for (size_t i = 0; i < one.size(); ++i) {
      EXPECT_EQ(two[i]["loss"], one[i]["loss"]) << name << " step " << i + 1;
      EXPECT_EQ(two[i]["grad_norm"], one[i]["grad_norm"]) << name << " step " << i + 1;
    }
    expectSameTensors("one-" + name + "/step-000004.safetensors",
                      "mpi-" + name + "/step-000004.safetensors");
  }
  fs::create_directories(dir_ / "resumed");
  fs::copy_file(dir_ / "one-split" / "step-000002.safetensors",
                dir_ / "resumed" / "step-000002.safetensors");
  Result resumed =
      shell(mpirun + train4("--steps 4 --devices 2 --pp 2 --micro-batches 4 "
                            "--devices-per-process 1 --checkpoint-dir resumed --resume"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  expectSameTensors("one-split/step-000004.safetensors", "resumed/step-000004.safetensors");

  Result odd =
      shell(mpirun + train4("--steps 1 --devices 4 --tp 2 --pp 2 --devices-per-process 1"));
  EXPECT_NE(odd.exit_code, 0);
  EXPECT_NE(odd.err.find("must hold whole tensor-parallel groups and whole replicas or a whole "
                         "number of one replica's pipeline stages"),
            std::string::npos)
      << odd.err;
}

// An overflow on the first stage's device (in saturation mode only its
// float status tells) skips the update on every stage, in one process and
// with the stages in two.
TEST_F(PipelineCli, AnOverflowOnOneStageSkipsTheUpdateOnEvery) {
  const std::string flags = "--steps 3 --devices 2 --pp 2 --micro-batches 2 --inject-overflow-at "
                            "1 --dtype f16 --target ascend910 --loss-scale fixed:1 ";
  auto expectSkipped = [&](const std::string &name) {
    std::vector<json> log = logLines(name + ".jsonl");
    ASSERT_EQ(log.size(), 3u) << name;
    EXPECT_FALSE(log[0]["overflow"].get<bool>()) << name;
    EXPECT_TRUE(log[1]["overflow"].get<bool>()) << name;
    EXPECT_FALSE(log[2]["overflow"].get<bool>()) << name;
  };
  ASSERT_EQ(run(train4(flags + "--log-json one.jsonl")).exit_code, 0);
  expectSkipped("one");
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "OpenMPI's mpirun is not installed";
  Result mpi = shell("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun "
                     "--oversubscribe -np 2 " +
                     kiln_ + " " + train4(flags + "--devices-per-process 1 --log-json mpi.jsonl"));
  if (mpi.exit_code != 0 && mpi.err.find("built without MPI") != std::string::npos)
    GTEST_SKIP() << "kiln was built without MPI";
  ASSERT_EQ(mpi.exit_code, 0) << mpi.err;
  expectSkipped("mpi");
}

// One track per device; each stage's actions in 1F1B order, the first
// stage idle while the last runs its first forward (the bubble).
TEST_F(PipelineCli, TheTraceShowsTheSchedule) {
  ASSERT_EQ(
      run(train4("--steps 1 --devices 2 --pp 2 --micro-batches 4 --trace trace.json")).exit_code,
      0);
  json trace = json::parse(slurp(path("trace.json")));
  std::map<int, std::vector<json>> tracks;
  for (const json &e : trace["traceEvents"])
    if (e["ph"] == "X")
      tracks[e["tid"].get<int>()].push_back(e);
  ASSERT_EQ(tracks.size(), 2u);
  auto names = [&](int device) {
    std::vector<std::string> out;
    for (const json &e : tracks[device])
      if (e["name"] != "allreduce" && e["name"] != "update")
        out.push_back(e["name"]);
    return out;
  };
  EXPECT_EQ(names(0),
            (std::vector<std::string>{"forward 0", "forward 1", "backward 0", "forward 2",
                                      "backward 1", "forward 3", "backward 2", "backward 3"}));
  EXPECT_EQ(names(1),
            (std::vector<std::string>{"forward 0", "backward 0", "forward 1", "backward 1",
                                      "forward 2", "backward 2", "forward 3", "backward 3"}));
  // Stage 1 starts when stage 0's first forward has ended; stage 0's first
  // backward when stage 1's has.
  const json &f0 = tracks[0][0], &f1 = tracks[1][0], &b1 = tracks[1][1], &b0 = tracks[0][2];
  EXPECT_GE(f1["ts"].get<int64_t>(), f0["ts"].get<int64_t>() + f0["dur"].get<int64_t>());
  EXPECT_GE(b0["ts"].get<int64_t>(), b1["ts"].get<int64_t>() + b1["dur"].get<int64_t>());
}

TEST_F(PipelineCli, ThePlanSaysWhatThePipelineHolds) {
  Result plan = run(train4("--devices 4 --pp 4 --micro-batches 8 --compile-only --target "
                           "ascend910 --dtype f16"));
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  for (const char *want :
       {"pp 4", "in 4 pipeline stages", "micro-batches in flight", "pipeline bubble and sends"})
    EXPECT_NE(plan.out.find(want), std::string::npos) << want << "\n" << plan.out;
}

TEST_F(PipelineCli, BadLayoutsAreClearErrors) {
  expectUsageError(run(train4("--steps 1 --devices 4 --pp 3")),
                   {"--tp 1 x --pp 3 does not divide --devices 4"});
  expectUsageError(run(train4("--steps 1 --devices 8 --pp 8 --micro-batches 8")),
                   {"--pp 8", "4 transformer layers, fewer than the stages"});
  expectUsageError(run(train4("--steps 1 --devices 2 --pp 2 --micro-batches 4 --grad-accum 2")),
                   {"--micro-batches 4 and --grad-accum 2"});
}

} // namespace
} // namespace kiln
