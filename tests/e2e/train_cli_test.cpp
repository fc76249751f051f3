// kiln train as a user runs it on the tiny Qwen: the loss trajectory of 8
// data-parallel devices (with and without ZeRO-1), and of tensor-parallel
// ones, is that of one device; an
// overflowing step is skipped everywhere and halves the loss scale; a run
// killed and resumed ends with the weights of an unbroken run; bad input is a
// clear error. The memory tests are train_memory_cli_test.cpp's.
#include <csignal>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "formats/safetensors.h"
#include "tests/e2e/train_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using nlohmann::json;

TEST_F(TrainCli, DataParallelAndZeroMatchOneDevice) {
  for (const char *devices : {"1", "8", "8 --zero 1"}) {
    Result r = run(train("--steps 20 --devices " + std::string(devices) + " --log-json log" +
                         std::string(devices).substr(0, 1) +
                         (std::string(devices).size() > 1 ? "z" : "") + ".jsonl"));
    ASSERT_EQ(r.exit_code, 0) << devices << ": " << r.err;
  }
  std::vector<json> one = logLines("log1.jsonl"), dp8 = logLines("log8.jsonl"),
                    zero = logLines("log8z.jsonl");
  ASSERT_EQ(one.size(), 20u);
  ASSERT_EQ(dp8.size(), 20u);
  ASSERT_EQ(zero.size(), 20u);
  for (size_t i = 0; i < one.size(); ++i) {
    const double want = one[i]["loss"];
    EXPECT_NEAR(dp8[i]["loss"].get<double>(), want, 1e-4 * want) << "step " << i + 1;
    EXPECT_NEAR(zero[i]["loss"].get<double>(), want, 1e-4 * want) << "step " << i + 1;
    for (const char *field :
         {"step", "loss", "loss_scale", "grad_norm", "overflow", "tokens_per_s"})
      EXPECT_TRUE(one[i].contains(field)) << field;
  }
  EXPECT_LT(one.back()["loss"].get<double>(), one.front()["loss"].get<double>() - 0.05)
      << "it learns";
}

// Tensor parallel over 8 ranks (one head each), 2 ranks x 4 replicas, and
// that with ZeRO-1: the loss and gradient-norm trajectories are one
// device's, and the final checkpoint, joined from the ranks' pieces, holds
// one device's weights.
TEST_F(TrainCli, TensorParallelMatchesOneDevice) {
  json config = json::parse(slurp(kTiny));
  config["num_attention_heads"] = 8;
  config["kv_channels"] = 8;
  write("tiny8.json", config.dump());
  const std::string model = path("tiny8.json");
  auto trainAs = [&](const std::string &name, const std::string &flags) {
    Result r = run("train " + model + " --data train.bin --batch 8 --seq 16 --lr 1e-3 --steps 20 " +
                   flags + " --log-json " + name +
                   ".jsonl --checkpoint-every 10 --checkpoint-dir " + name);
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
    return logLines(name + ".jsonl");
  };
  const std::vector<json> one = trainAs("one", "--devices 1");
  ASSERT_EQ(one.size(), 20u);
  for (const auto &[name, flags] : std::vector<std::pair<std::string, std::string>>{
           {"tp8", "--devices 8 --tp 8"},
           {"tp2dp4", "--devices 8 --tp 2"},
           {"tp2dp4z", "--devices 8 --tp 2 --zero 1"}}) {
    const std::vector<json> got = trainAs(name, flags);
    ASSERT_EQ(got.size(), 20u) << name;
    expectNearLog(one, got, 1e-4, name);
    expectNearTensors("one/step-000020.safetensors", name + "/step-000020.safetensors", 1e-4);
  }
  EXPECT_LT(one.back()["loss"].get<double>(), one.front()["loss"].get<double>() - 0.05);

  // Resumed from the tensor-parallel checkpoint of step 10, the run ends
  // exactly where the unbroken one did.
  fs::create_directories(dir_ / "resumed");
  fs::copy_file(dir_ / "tp2dp4z" / "step-000010.safetensors",
                dir_ / "resumed" / "step-000010.safetensors");
  Result resumed = run("train " + model + " --data train.bin --batch 8 --seq 16 --lr 1e-3 " +
                       "--steps 20 --devices 8 --tp 2 --zero 1 --checkpoint-dir resumed --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  expectSameTensors("tp2dp4z/step-000020.safetensors", "resumed/step-000020.safetensors");
}

TEST_F(TrainCli, AnOverflowIsSkippedOnEveryDeviceAndHalvesTheScale) {
  ASSERT_EQ(run(train("--steps 2 --devices 4 --checkpoint-dir a")).exit_code, 0);
  Result r = run(train("--steps 3 --devices 4 --loss-scale dynamic:1024,2,1000 "
                       "--inject-overflow-at 2 --checkpoint-dir b --checkpoint-every 1 "
                       "--log-json log.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("overflow: update skipped on every device"), std::string::npos) << r.out;
  std::vector<json> steps = logLines("log.jsonl");
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[1]["overflow"], false);
  EXPECT_EQ(steps[2]["overflow"], true);
  EXPECT_EQ(steps[2]["loss_scale"], 1024.0) << "the scale the step ran with";
  auto before = readSafetensors(path("b/step-000002.safetensors"));
  auto after = readSafetensors(path("b/step-000003.safetensors"));
  ASSERT_TRUE(before.isOk() && after.isOk());
  EXPECT_EQ(after->metadata.at("loss_scale"), "512") << "halved";
  EXPECT_EQ(after->metadata.at("updates"), "2") << "the skipped step applied no update";
  for (const auto &[name, t] : before->tensors)
    EXPECT_TRUE(after->tensors.at(name) == t) << name << " changed in the skipped step";

  // Training goes on from there.
  Result more = run(train("--steps 5 --devices 4 --loss-scale dynamic:1024,2,1000 "
                          "--inject-overflow-at 2 --checkpoint-dir b --resume"));
  ASSERT_EQ(more.exit_code, 0) << more.err;
  EXPECT_NE(more.out.find("step 5/5"), std::string::npos) << more.out;
  EXPECT_EQ(more.out.find("overflow:"), std::string::npos) << more.out;
}

// The 910 has only the saturation mode: an overflowing gradient is clamped
// to a finite value, and only the device's float status tells.
TEST_F(TrainCli, ASaturatingValueOnOneDeviceSkipsTheUpdateOnEveryDevice) {
  Result r = run(train("--steps 3 --devices 4 --dtype f16 --target ascend910 "
                       "--loss-scale fixed:1 --inject-overflow-at 1 --checkpoint-dir b "
                       "--checkpoint-every 1 --log-json log.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<json> steps = logLines("log.jsonl");
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0]["overflow"], false);
  EXPECT_EQ(steps[1]["overflow"], true) << "the status of one device skips the step";
  EXPECT_EQ(steps[2]["overflow"], false) << "the status is cleared before each step";
  auto before = readSafetensors(path("b/step-000001.safetensors"));
  auto after = readSafetensors(path("b/step-000002.safetensors"));
  ASSERT_TRUE(before.isOk() && after.isOk());
  EXPECT_EQ(after->metadata.at("updates"), "1");
  for (const auto &[name, t] : before->tensors)
    EXPECT_TRUE(after->tensors.at(name) == t) << name << " changed in the skipped step";
}

// fp16 with MindSpore's default scale of 2^24 overflows in the first steps:
// on the 910 (saturation) the float status sees it as the 910B (INFNAN) sees
// the infs, so both skip the same steps and learn alike.
TEST_F(TrainCli, SaturationModeTrainingSkipsOverflowsAsInfNanModeDoes) {
  auto trainOn = [&](const std::string &target) {
    const std::string file = "log." + target + ".jsonl";
    Result r =
        run(train("--steps 40 --devices 8 --dtype f16 --target " + target + " --log-json " + file));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return logLines(file);
  };
  std::vector<json> saturation = trainOn("ascend910");
  std::vector<json> infnan = trainOn("ascend910b");
  ASSERT_EQ(saturation.size(), 40u);
  ASSERT_EQ(infnan.size(), 40u);
  EXPECT_EQ(saturation[0]["overflow"], true) << "2^24 overflows f16 gradients at once";
  EXPECT_EQ(saturation[1]["loss_scale"], saturation[0]["loss_scale"].get<double>() / 2);
  for (size_t i = 0; i < 40; ++i)
    EXPECT_EQ(saturation[i]["overflow"], infnan[i]["overflow"]) << "step " << i + 1;
  const double want = infnan.back()["loss"], got = saturation.back()["loss"];
  EXPECT_NEAR(got, want, 0.02 * want);
  EXPECT_LT(got, saturation.front()["loss"].get<double>() - 0.05) << "it learns";
}

TEST_F(TrainCli, KilledAndResumedEndsWithTheWeightsOfAnUnbrokenRun) {
  ASSERT_EQ(run(train("--steps 8 --devices 2 --checkpoint-dir whole")).exit_code, 0);

  // Killed (SIGKILL) once its step-4 checkpoint exists, then resumed.
  const std::string cmd = "cd " + dir_.string() + " && exec " + kiln_ + " " +
                          train("--steps 8 --devices 2 --checkpoint-dir broken "
                                "--checkpoint-every 2 --log-json broken.jsonl") +
                          " >/dev/null 2>&1";
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char *>(nullptr));
    _exit(127);
  }
  const fs::path ckpt = dir_ / "broken" / "step-000004.safetensors";
  for (int i = 0; i < 6000 && !fs::exists(ckpt); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ::kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(fs::exists(ckpt));
  fs::remove(dir_ / "broken" / "step-000008.safetensors"); // had it finished already

  Result resumed = run(train("--steps 8 --devices 2 --checkpoint-dir broken --resume"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("resumed from"), std::string::npos) << resumed.out;
  auto want = readSafetensors(path("whole/step-000008.safetensors"));
  auto got = readSafetensors(path("broken/step-000008.safetensors"));
  ASSERT_TRUE(want.isOk() && got.isOk());
  ASSERT_EQ(want->tensors.size(), got->tensors.size());
  for (const auto &[name, t] : want->tensors)
    EXPECT_TRUE(got->tensors.at(name) == t) << name << " differs from the unbroken run";
  EXPECT_EQ(got->metadata, want->metadata);
}

// Two processes of four devices under mpirun give one process of eight's
// losses bit for bit: the sums run in rank order either way. With --tp 2
// each process holds two whole tensor-parallel groups.
TEST_F(TrainCli, TwoMpiProcessesOfFourMatchOneOfEight) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "OpenMPI's mpirun is not installed";
  for (const std::string tp : {"1", "2"}) {
    const std::string flags = "--steps 6 --devices 8 --tp " + tp;
    ASSERT_EQ(run(train(flags + " --log-json one.jsonl")).exit_code, 0);
    Result mpi =
        shell("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun "
              "--oversubscribe -np 2 " +
              kiln_ + " " + train(flags + " --devices-per-process 4 --log-json mpi.jsonl"));
    if (mpi.exit_code != 0 && mpi.err.find("built without MPI") != std::string::npos)
      GTEST_SKIP() << "kiln was built without MPI";
    ASSERT_EQ(mpi.exit_code, 0) << mpi.err;
    std::vector<json> one = logLines("one.jsonl"), two = logLines("mpi.jsonl");
    ASSERT_EQ(two.size(), 6u) << "one process writes the log";
    for (size_t i = 0; i < one.size(); ++i)
      EXPECT_EQ(two[i]["loss"], one[i]["loss"]) << "tp " << tp << ", step " << i + 1;
    EXPECT_EQ(std::count(mpi.out.begin(), mpi.out.end(), '\n'), 8) << mpi.out; // one prints
  }
}

// Under MPI with ZeRO-1 and ZeRO-2 each process holds only its replicas'
// moments (and with ZeRO-2 gradients): a checkpoint gathers them from their
// owners and equals one process's bit for bit, and every process resumes
// from it.
class ZeroAcrossMpi : public TrainCli, public ::testing::WithParamInterface<int> {};

TEST_P(ZeroAcrossMpi, CheckpointsGatherEveryMoment) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "OpenMPI's mpirun is not installed";
  const std::string flags = "--steps 6 --devices 8 --tp 2 --zero " + std::to_string(GetParam()) +
                            " --checkpoint-every 3 ";
  ASSERT_EQ(run(train(flags + "--checkpoint-dir one")).exit_code, 0);
  auto mpirun = [&](const std::string &more) {
    return shell("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun "
                 "--oversubscribe -np 2 " +
                 kiln_ + " " + train(flags + "--devices-per-process 4 " + more));
  };
  Result mpi = mpirun("--checkpoint-dir two");
  if (mpi.exit_code != 0 && mpi.err.find("built without MPI") != std::string::npos)
    GTEST_SKIP() << "kiln was built without MPI";
  ASSERT_EQ(mpi.exit_code, 0) << mpi.err;
  auto same = [&](const std::string &a, const std::string &b) {
    auto x = readSafetensors(path(a)), y = readSafetensors(path(b));
    ASSERT_TRUE(x.isOk() && y.isOk()) << a << ", " << b;
    ASSERT_EQ(x->tensors.size(), y->tensors.size());
    for (const auto &[name, t] : x->tensors)
      EXPECT_TRUE(y->tensors.at(name) == t) << b << ": " << name << " differs from " << a;
  };
  same("one/step-000006.safetensors", "two/step-000006.safetensors");

  fs::remove(dir_ / "two" / "step-000006.safetensors");
  Result resumed = mpirun("--checkpoint-dir two --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(std::count(resumed.out.begin(), resumed.out.end(), '\n'), 7) << resumed.out;
  same("one/step-000006.safetensors", "two/step-000006.safetensors");
}

INSTANTIATE_TEST_SUITE_P(Zero, ZeroAcrossMpi, ::testing::Values(1, 2));

// An error in one process (only rank 0 opens the log) ends the whole MPI
// job at once instead of leaving the other waiting in its first collective.
TEST_F(TrainCli, AnErrorInOneMpiProcessEndsTheJob) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "OpenMPI's mpirun is not installed";
  Result r = shell("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 mpirun "
                   "--oversubscribe -np 2 " +
                   kiln_ + " " +
                   train("--steps 3 --devices 8 --devices-per-process 4 --log-json "
                         "no/such/folder/log.jsonl"));
  if (r.err.find("built without MPI") != std::string::npos)
    GTEST_SKIP() << "kiln was built without MPI";
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "the job hung until the timeout";
  EXPECT_NE(r.err.find("no/such/folder/log.jsonl: cannot open the log for writing"),
            std::string::npos)
      << r.err;
}

// Gradient accumulation: each replica's share of --batch in K micro-batches
// trains as the whole batch does, on one device and across data and tensor
// parallel ones; the plan adds the f32 sums the micro-batches leave on the
// device, and the measured peak is the plan; a resumed run ends as an
// unbroken one.
TEST_F(TrainCli, GradientAccumulationTrainsAsTheWholeBatch) {
  const std::string batch32 = "train " + kTiny + " --data train.bin --batch 32 --seq 16 --lr 1e-3 ";
  auto trainAs = [&](const std::string &name, const std::string &flags) {
    Result r = run(batch32 + "--steps 12 --checkpoint-every 6 --checkpoint-dir " + name +
                   " --log-json " + name + ".jsonl " + flags);
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
    const auto [measured, planned] = measuredAndPlannedPeak(r.out);
    expectMeasuredPeakIsPlan(r.out, name);
    EXPECT_EQ(measured, planned) << name << ": " << r.out;
    return logLines(name + ".jsonl");
  };
  const std::vector<json> whole = trainAs("whole", "--devices 1");
  ASSERT_EQ(whole.size(), 12u);
  for (const auto &[name, flags] : std::vector<std::pair<std::string, std::string>>{
           {"k4", "--devices 1 --grad-accum 4"},
           {"dp2k4z", "--devices 2 --zero 1 --grad-accum 4"},
           {"tp2dp2k2", "--devices 4 --tp 2 --grad-accum 2"}}) {
    const std::vector<json> got = trainAs(name, flags);
    ASSERT_EQ(got.size(), 12u) << name;
    expectNearLog(whole, got, 1e-5, name);
  }
  Result plan = run(batch32 + "--devices 1 --grad-accum 4 --compile-only");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_NE(plan.out.find("(32 per replica: 8 per micro-batch, 4 micro-batches)"),
            std::string::npos)
      << plan.out;
  EXPECT_NE(plan.out.find("+ accumulated gradients "), std::string::npos) << plan.out;

  fs::create_directories(dir_ / "resumed");
  fs::copy_file(dir_ / "dp2k4z" / "step-000006.safetensors",
                dir_ / "resumed" / "step-000006.safetensors");
  Result resumed =
      run(batch32 + "--steps 12 --devices 2 --zero 1 --grad-accum 4 --checkpoint-dir resumed "
                    "--resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  expectSameTensors("dp2k4z/step-000012.safetensors", "resumed/step-000012.safetensors");

  expectUsageError(run("train " + kTiny +
                       " --data train.bin --steps 1 --batch 12 --devices 2 "
                       "--grad-accum 4"),
                   {"--batch 12", "2 replicas x 4 micro-batches", "multiple of 8"});
}

// Under mixed precision the devices keep the weights' compute copies unless
// --no-weight-copies: the same losses either way, and a plan without the
// copies where the update sets the peak (the tiny Qwen in f16 on the 910B).
TEST_F(TrainCli, WeightCopiesTrainAsTheCastsAndCanBeTurnedOff) {
  const std::string mixed = train("--steps 3 --devices 2 --target ascend910b --precision-mode "
                                  "allow_mix_precision --loss-scale dynamic:1024,2,1000 ");
  Result with = run(mixed + "--log-json with.jsonl");
  Result without = run(mixed + "--no-weight-copies --log-json without.jsonl");
  ASSERT_EQ(with.exit_code, 0) << with.err;
  ASSERT_EQ(without.exit_code, 0) << without.err;
  expectMeasuredPeakIsPlan(with.out, "with copies");
  expectMeasuredPeakIsPlan(without.out, "without copies");
  EXPECT_GT(measuredAndPlannedBytes(with.out).second, measuredAndPlannedBytes(without.out).second)
      << "the copies are held through the update";
  const std::vector<json> a = logLines("with.jsonl"), b = logLines("without.jsonl");
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  for (size_t s = 0; s < a.size(); ++s) {
    EXPECT_EQ(a[s]["loss"], b[s]["loss"]) << "step " << s + 1;
    EXPECT_EQ(a[s]["grad_norm"], b[s]["grad_norm"]) << "step " << s + 1;
  }
}

TEST_F(TrainCli, BadInputIsAClearError) {
  expectRunError(run(train("--steps 1 --devices 3 --tp 3")),
                 {"tensor parallelism over 3 ranks", "num_attention_heads (4)"});
  expectUsageError(run(train("--steps 1 --devices 8 --tp 3")),
                   {"--tp 3 does not divide --devices 8"});
  expectRunError(run(train("--steps 1 --devices 4 --tp 2 --devices-per-process 3")),
                 {"--devices-per-process 3", "multiple of --tp 2"});
  expectUsageError(run(train("--steps 1 --devices 3")), {"--batch 8", "multiple of 3"});
  expectUsageError(run(train("--steps 1 --loss-scale dynamic:1")),
                   {"--loss-scale", "three numbers"});
  expectUsageError(run(train("--steps 1 --device-memory lots")), {"--device-memory", "lots"});
  expectUsageError(run(train("--steps 1 --resume")), {"--resume needs --checkpoint-dir"});
  write("odd.bin", "abc");
  expectRunError(run("train " + kTiny + " --data odd.bin --steps 1"),
                 {"odd.bin", "not a whole number of uint16 tokens"});
  fs::create_directories(dir_ / "ckpt");
  write("ckpt/step-000001.safetensors", "not a safetensors file");
  Result r = run(train("--steps 2 --devices 1 --checkpoint-dir ckpt --resume"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("step-000001.safetensors"), std::string::npos) << r.err;
}

TEST_F(TrainCli, TheTraceHasATrackPerDevice) {
  ASSERT_EQ(run(train("--steps 2 --devices 4 --trace trace.json")).exit_code, 0);
  json trace = json::parse(slurp(path("trace.json")));
  std::set<int> tracks;
  std::set<std::string> names;
  for (const json &e : trace["traceEvents"])
    if (e["ph"] == "X") {
      tracks.insert(e["tid"].get<int>());
      names.insert(e["name"].get<std::string>());
    }
  EXPECT_EQ(tracks, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(names, (std::set<std::string>{"forward+backward", "allreduce", "update"}));
}

} // namespace
} // namespace kiln
