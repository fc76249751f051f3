// kiln train --virtual-stages and --pp-layers on an eight-layer tiny Qwen:
// the interleaved 1F1B schedule (V = 2 over 2 and 4 devices, with tensor
// parallelism, ZeRO-1 and full recomputation) and uneven splits of the
// layers train as one device does (the loss and gradient norm within 1e-5,
// the final weights within 1e-4), each run's measured device peak is its
// plan, a resumed run ends as an unbroken one, two MPI processes holding a
// pipeline's devices apart match one process bit for bit, validation walks
// the model stages as one device does, the trace shows
// each device's model stages interleaved, and bad shapes are usage errors.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/train_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using nlohmann::json;

class InterleavedCli : public TrainCli {
protected:
  void SetUp() override {
    TrainCli::SetUp();
    json config = json::parse(slurp(kTiny));
    config["num_hidden_layers"] = 8;
    write("tiny8.json", config.dump());
  }
  std::string train8(const std::string &flags) {
    return "train " + path("tiny8.json") + " --data train.bin --batch 8 --seq 16 --lr 1e-3 " +
           flags;
  }
  // A 20-step run checkpointed at 10 and 20; its log.
  std::vector<json> trainAs(const std::string &name, const std::string &flags) {
    Result r = runCheckpointed(train8(flags), name);
    expectMeasuredPeakIsPlan(r.out, name);
    return logLines(name + ".jsonl");
  }
  static std::string mpirun() {
    return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe "
           "-np 2 ";
  }
};

TEST_F(InterleavedCli, InterleavedAndUnevenStagesTrainAsOneDevice) {
  const std::vector<json> one = trainAs("one", "--devices 1");
  ASSERT_EQ(one.size(), 20u);
  for (const auto &[name, flags] : std::vector<std::pair<std::string, std::string>>{
           {"pp2v2", "--devices 2 --pp 2 --virtual-stages 2 --micro-batches 4"},
           {"pp4v2", "--devices 4 --pp 4 --virtual-stages 2 --micro-batches 8"},
           {"pp2v2tp2spz1full", "--devices 8 --pp 2 --virtual-stages 2 --tp 2 --sequence-parallel "
                                "--zero 1 "
                                "--recompute full --micro-batches 2"},
           {"uneven", "--devices 4 --pp 4 --pp-layers 1,3,3,1 --micro-batches 4"},
           {"unevenv2", "--devices 2 --pp 2 --virtual-stages 2 --pp-layers 1,3,3,1 "
                        "--micro-batches 2"}}) {
    const std::vector<json> got = trainAs(name, flags);
    ASSERT_EQ(got.size(), 20u) << name;
    expectNearLog(one, got, 1e-5, name);
    expectNearTensors("one/step-000020.safetensors", name + "/step-000020.safetensors", 1e-4);
  }
  EXPECT_LT(one.back()["loss"].get<double>(), one.front()["loss"].get<double>() - 0.05);

  // Resumed from the interleaved run's checkpoint of step 10, the run ends
  // exactly where the unbroken one did.
  fs::create_directories(dir_ / "resumed");
  fs::copy_file(dir_ / "pp2v2" / "step-000010.safetensors",
                dir_ / "resumed" / "step-000010.safetensors");
  Result resumed = run(train8("--steps 20 --devices 2 --pp 2 --virtual-stages 2 "
                              "--micro-batches 4 --checkpoint-dir resumed --resume"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  expectSameTensors("pp2v2/step-000020.safetensors", "resumed/step-000020.safetensors");
}

// Two processes, one pipeline device each: each sends its model stages'
// activations and gradients to the other twice per micro-batch (forward
// and backward through both chunks); the losses, norms and checkpoint are
// one process's bits, and a run resumed across them ends as the unbroken one.
TEST_F(InterleavedCli, MpiProcessesMatchOne) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "OpenMPI's mpirun is not installed";
  const std::string flags =
      "--steps 4 --checkpoint-every 2 --devices 2 --pp 2 --virtual-stages 2 --micro-batches 4";
  ASSERT_EQ(run(train8(flags + " --log-json one.jsonl --checkpoint-dir one")).exit_code, 0);
  Result mpi = shell(mpirun() + kiln_ + " " +
                     train8(flags + " --devices-per-process 1 --log-json mpi.jsonl "
                                    "--checkpoint-dir mpi"));
  if (mpi.exit_code != 0 && mpi.err.find("built without MPI") != std::string::npos)
    GTEST_SKIP() << "kiln was built without MPI";
  ASSERT_EQ(mpi.exit_code, 0) << mpi.err;
  std::vector<json> one = logLines("one.jsonl"), two = logLines("mpi.jsonl");
  ASSERT_EQ(two.size(), 4u);
  expectSameLog(one, two);
  expectSameTensors("one/step-000004.safetensors", "mpi/step-000004.safetensors");
  fs::create_directories(dir_ / "resumed");
  fs::copy_file(dir_ / "one" / "step-000002.safetensors",
                dir_ / "resumed" / "step-000002.safetensors");
  Result resumed = shell(mpirun() + kiln_ + " " +
                         train8("--steps 4 --devices 2 --pp 2 --virtual-stages 2 "
                                "--micro-batches 4 --devices-per-process 1 "
                                "--checkpoint-dir resumed --resume"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  expectSameTensors("one/step-000004.safetensors", "resumed/step-000004.safetensors");
}

// Validation walks the model stages in order, each on its device, in one
// process and across two: the held-out losses are one device's.
TEST_F(InterleavedCli, ValidationWalksTheModelStagesAsOneDevice) {
  const std::string eval = " --steps 2 --eval-data train.bin --eval-every 1 --eval-tokens 256 ";
  auto losses = [&](const std::string &log) {
    std::vector<double> out;
    for (const json &line : logLines(log))
      if (line.contains("eval_loss"))
        out.push_back(line["eval_loss"].get<double>());
    return out;
  };
  ASSERT_EQ(run(train8("--devices 1" + eval + "--log-json one.jsonl")).exit_code, 0);
  const std::string flags = "--devices 2 --pp 2 --virtual-stages 2 --micro-batches 4";
  Result pp = run(train8(flags + eval + "--log-json pp.jsonl"));
  ASSERT_EQ(pp.exit_code, 0) << pp.err;
  const std::vector<double> want = losses("one.jsonl"), got = losses("pp.jsonl");
  ASSERT_EQ(want.size(), 2u);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5 * want[i]) << i;
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "OpenMPI's mpirun is not installed";
  Result mpi = shell(mpirun() + kiln_ + " " +
                     train8(flags + eval + "--devices-per-process 1 --log-json mpi.jsonl"));
  if (mpi.exit_code != 0 && mpi.err.find("built without MPI") != std::string::npos)
    GTEST_SKIP() << "kiln was built without MPI";
  ASSERT_EQ(mpi.exit_code, 0) << mpi.err;
  EXPECT_EQ(losses("mpi.jsonl"), got);
}

// Device 0 holds model stages 0 and 2: Megatron's order, four forwards of
// warm-up (two micro-batches through each of its stages) before the first
// backward, which is model stage 2's.
TEST_F(InterleavedCli, TheTraceShowsTheInterleavedSchedule) {
  ASSERT_EQ(run(train8("--steps 1 --devices 2 --pp 2 --virtual-stages 2 --micro-batches 4 "
                       "--trace trace.json"))
                .exit_code,
            0);
  json trace = json::parse(slurp(path("trace.json")));
  std::vector<std::string> device0;
  for (const json &e : trace["traceEvents"])
    if (e["ph"] == "X" && e["tid"] == 0 && e["name"] != "allreduce" && e["name"] != "update")
      device0.push_back(e["name"]);
  EXPECT_EQ(device0, (std::vector<std::string>{
                         "forward 0 of stage 0", "forward 1 of stage 0", "forward 0 of stage 2",
                         "forward 1 of stage 2", "forward 2 of stage 0", "backward 0 of stage 2",
                         "forward 3 of stage 0", "backward 1 of stage 2", "forward 2 of stage 2",
                         "backward 0 of stage 0", "forward 3 of stage 2", "backward 1 of stage 0",
                         "backward 2 of stage 2", "backward 3 of stage 2", "backward 2 of stage 0",
                         "backward 3 of stage 0"}));
}

// The plan names the interleaving; the interleaved pipeline's predicted
// bubble is smaller than the plain one's over the same devices.
TEST_F(InterleavedCli, ThePlanSaysWhatInterleavingChanges) {
  const std::string flags =
      "--devices 4 --pp 4 --micro-batches 8 --compile-only --target ascend910 --dtype f16";
  Result plain = run(train8(flags));
  Result interleaved = run(train8(flags + " --virtual-stages 2"));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(interleaved.exit_code, 0) << interleaved.err;
  for (const char *want : {"pp 4, virtual stages 2", "in 4 pipeline stages of 2 interleaved",
                           "micro-batches in flight", "pipeline bubble and sends"})
    EXPECT_NE(interleaved.out.find(want), std::string::npos) << want << "\n" << interleaved.out;
  auto bubble = [](const std::string &out) {
    const size_t at = out.find("pipeline bubble and sends ");
    return at == std::string::npos ? std::string() : out.substr(at, out.find(')', at) - at);
  };
  EXPECT_NE(bubble(plain.out), bubble(interleaved.out));
}

// Each bad shape is a usage error (exit code 2) saying what to change.
TEST_F(InterleavedCli, BadShapesAreUsageErrors) {
  auto expectUsage = [](const Result &r, const std::string &fragment) {
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
  };
  expectUsage(run(train8("--steps 1 --devices 2 --pp 2 --virtual-stages 3 --micro-batches 2")),
              "8 transformer layers do not split evenly over 6 model stages");
  expectUsage(run(train8("--steps 1 --devices 4 --pp 4 --virtual-stages 2 --micro-batches 2")),
              "--micro-batches 2 must be a multiple of 4");
  expectUsage(run(train8("--steps 1 --devices 1 --virtual-stages 2")), "needs --pp 2 or more");
  expectUsage(run(train8("--steps 1 --devices 2 --pp 2 --pp-layers 3,4")),
              "--pp-layers 3,4 adds up to 7 layers; the model has 8");
  expectUsage(run(train8("--steps 1 --devices 2 --pp 2 --virtual-stages 2 --micro-batches 2 "
                         "--pp-layers 4,4")),
              "2 counts for 4 model stages");
  expectUsage(run(train8("--steps 1 --devices 2 --pp 2 --pp-layers 8,0")),
              "expected positive layer counts");
}

} // namespace
} // namespace kiln
