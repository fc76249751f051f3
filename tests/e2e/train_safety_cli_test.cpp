// kiln train against careless and hostile input: numbers that are NaN,
// infinite or out of range, two runs on one checkpoint folder, resuming
// with other settings or from nothing, damaged checkpoints, absurd device
// counts and sizes, misspelt flags. Each is one clear error line, never a
// crash, a hang or a silent wrong run.
#include <cmath>
#include <fcntl.h>
#include <limits>
#include <sys/file.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "formats/safetensors.h"
#include "tests/e2e/cli_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using nlohmann::json;

class TrainSafetyCli : public Cli {
protected:
  void SetUp() override {
    Cli::SetUp();
    std::vector<uint16_t> tokens;
    for (int i = 0; i < 4000; ++i)
      tokens.push_back(static_cast<uint16_t>((i * 7 + 3) % 512));
    write("train.bin", std::string(reinterpret_cast<const char *>(tokens.data()),
                                   tokens.size() * sizeof(uint16_t)));
  }

  static std::string train(const std::string &flags) {
    return "train " + kTiny + " --data train.bin --batch 2 --seq 16 " + flags;
  }

  // Rewrites checkpoint `file` (relative to the test folder) with `edit`.
  void editCheckpoint(const std::string &file, const std::function<void(SafetensorsFile &)> &edit) {
    auto ckpt = readSafetensors(path(file));
    ASSERT_TRUE(ckpt.isOk()) << ckpt.message();
    edit(*ckpt);
    ASSERT_TRUE(writeSafetensors(path(file), *ckpt).isOk());
  }
};

TEST_F(TrainSafetyCli, NumbersAreCheckedWhereTheyEnter) {
  auto train = [](const std::string &flags) {
    return TrainSafetyCli::train("--devices 1 " + flags);
  };
  expectUsageError(run(train("--steps 1 --lr nan")), {"--lr", "finite number above 0", "'nan'"});
  expectUsageError(run(train("--steps 1 --lr inf")), {"--lr", "'inf'"});
  expectUsageError(run(train("--steps 1 --lr -1")), {"--lr", "'-1'"});
  expectUsageError(run(train("--steps 1 --clip-grad-norm nan")), {"--clip-grad-norm", "'nan'"});
  expectUsageError(run(train("--steps 1 --min-lr nan")), {"--min-lr", "'nan'"});
  expectUsageError(run(train("--steps 1 --min-lr 1 --lr 1e-4")),
                   {"--min-lr 1 is above --lr 0.0001"});
  for (const char *scale : {"fixed:nan", "fixed:inf", "fixed:-1", "fixed:0", "fixed:1e39"})
    expectUsageError(run(train(std::string("--steps 1 --loss-scale ") + scale)),
                     {"--loss-scale", scale, "finite scale above 0"});
  for (const char *scale : {"dynamic:nan,2,10", "dynamic:1024,nan,10", "dynamic:1e39,2,10"})
    expectUsageError(run(train(std::string("--steps 1 --loss-scale ") + scale)),
                     {"--loss-scale", scale});
}

// CLI11's own range check printed its bounds, one of them 309 digits long.
TEST_F(TrainSafetyCli, RangeErrorsAreReadable) {
  Result r = run(train("--steps 1 --batch 0"));
  expectUsageError(r, {"--batch", "whole number above 0", "got '0'"});
  EXPECT_LT(r.err.size(), 120u) << r.err;
  expectUsageError(run(train("--steps 1.5")), {"--steps", "got '1.5'"});
  expectUsageError(run(train("--steps 1 --warmup -3")), {"--warmup", "at least 0", "got '-3'"});
  expectUsageError(run("graph " + kTiny + " --batch 0"), {"--batch", "got '0'"});
}

TEST_F(TrainSafetyCli, AbsurdDeviceCountsAreRefusedAtOnce) {
  // It spun for 30 s planning a billion replicas, even with --compile-only.
  Result r =
      shell("timeout 20 " + kiln_ + " train " + kTiny + " --devices 1000000000 --compile-only");
  expectUsageError(r, {"--devices 1000000000", "at most 65536 devices"});
  expectUsageError(run(train("--steps 1 --devices 131072")), {"at most 65536"});
  expectUsageError(run("train " + kTiny + " --data train.bin --seq 16 --steps 1 --devices 4096 " +
                       "--batch 4096"),
                   {"--devices 4096 in one process", "at most 1024"});
}

TEST_F(TrainSafetyCli, SizesPastInt64AreAnErrorNamingTheShape) {
  // The attention scores of seq 2^31 - 1 need 7.4e19 bytes: the plan wrapped
  // around to a wrong 27.9 TiB.
  json config = json::parse(slurp(kTiny));
  config["seq_length"] = 2147483647;
  config["max_position_embeddings"] = 2147483647;
  write("long.json", config.dump());
  expectRunError(run("train long.json --batch 1 --devices 1 --compile-only"),
                 {"long.json", "needs more than 2^63 bytes"});
  expectRunError(run("graph long.json"), {"long.json", "needs more than 2^63 bytes"});
}

// Two runs on one folder interleaved their checkpoints; the second is now
// refused with the holder's pid, for as long as the holder lives.
TEST_F(TrainSafetyCli, OneRunAtATimePerCheckpointFolder) {
  fs::create_directories(dir_ / "ckpt");
  const std::string lock = path("ckpt/.kiln-train.lock");
  int fd = ::open(lock.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  const std::string pid = std::to_string(::getpid());
  ASSERT_EQ(::write(fd, pid.data(), pid.size()), static_cast<ssize_t>(pid.size()));
  expectRunError(run(train("--steps 1 --devices 1 --checkpoint-dir ckpt")),
                 {"checkpoint folder 'ckpt' is in use", "pid " + pid, "--checkpoint-dir"});
  EXPECT_FALSE(fs::exists(dir_ / "ckpt" / "step-000001.safetensors"));
  ::close(fd); // as a process that ends, however it ends
  Result r = run(train("--steps 1 --devices 1 --checkpoint-dir ckpt"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir_ / "ckpt" / "step-000001.safetensors"));
}

// Resuming a folder of another run's settings mixed two histories.
TEST_F(TrainSafetyCli, ResumingWithOtherSettingsIsRefusedUnlessAsked) {
  ASSERT_EQ(run(train("--steps 2 --devices 2 --checkpoint-dir ckpt")).exit_code, 0);
  auto ckpt = readSafetensors(path("ckpt/step-000002.safetensors"));
  ASSERT_TRUE(ckpt.isOk());
  for (const char *key :
       {"setting.model", "setting.layout", "setting.batch", "setting.dtype", "setting.data"})
    EXPECT_TRUE(ckpt->metadata.count(key)) << key;

  expectRunError(run(train("--steps 3 --devices 1 --checkpoint-dir ckpt --resume")),
                 {"step-000002.safetensors", "other settings", "layout", "--resume-any-settings"});
  expectRunError(run(train("--steps 3 --devices 2 --dtype bf16 --checkpoint-dir ckpt --resume")),
                 {"dtype 'f32' (now 'bf16')"});
  fs::copy_file(dir_ / "train.bin", dir_ / "other.bin");
  expectRunError(run("train " + kTiny +
                     " --data other.bin --batch 2 --seq 16 --lr 1e-3 --steps 3 --devices 2 "
                     "--checkpoint-dir ckpt --resume"),
                 {"data", "other.bin"});
  Result anyway =
      run(train("--steps 3 --devices 1 --checkpoint-dir ckpt --resume --resume-any-settings"));
  ASSERT_EQ(anyway.exit_code, 0) << anyway.err;
  EXPECT_NE(anyway.out.find("resumed from"), std::string::npos) << anyway.out;
  Result same = run(train("--steps 4 --devices 1 --checkpoint-dir ckpt --resume"));
  EXPECT_EQ(same.exit_code, 0) << same.err;
}

// --resume on an empty or mistyped folder silently started from step 1.
TEST_F(TrainSafetyCli, ResumingFromNothingSaysSo) {
  expectRunError(run(train("--steps 1 --devices 1 --checkpoint-dir typo --resume")),
                 {"--resume: no checkpoint", "'typo'", "--resume-if-exists"});
  Result r = run(train("--steps 1 --devices 1 --checkpoint-dir fresh --resume-if-exists"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("resumed from"), std::string::npos) << r.out;
  Result again = run(train("--steps 2 --devices 1 --checkpoint-dir fresh --resume-if-exists"));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("resumed from"), std::string::npos) << again.out;
}

// NaN weights were trained on, a negative adam.v gave NaN updates, absurd
// counters were taken as they were.
TEST_F(TrainSafetyCli, ADamagedCheckpointIsAnErrorNamingFileAndTensor) {
  ASSERT_EQ(run(train("--steps 1 --devices 1 --checkpoint-dir good")).exit_code, 0);
  const std::string good = "good/step-000001.safetensors";
  auto resumeFrom = [&](const std::string &name,
                        const std::function<void(SafetensorsFile &)> &edit) {
    fs::create_directories(dir_ / name);
    fs::copy_file(dir_ / good, dir_ / name / "step-000001.safetensors");
    editCheckpoint(name + "/step-000001.safetensors", edit);
    return run(train("--steps 2 --devices 1 --resume --checkpoint-dir " + name));
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  expectRunError(
      resumeFrom("nan",
                 [&](SafetensorsFile &f) {
                   f.tensors.at("transformer.wte.weight").setFloat(3, nan, OverflowMode::InfNan);
                 }),
      {"nan/step-000001.safetensors", "'transformer.wte.weight' element 3", "finite"});
  expectRunError(
      resumeFrom(
          "negv",
          [](SafetensorsFile &f) {
            f.tensors.at("adam.v.transformer.wte.weight").setFloat(0, -1.0f, OverflowMode::InfNan);
          }),
      {"negv/step-000001.safetensors", "'adam.v.transformer.wte.weight'",
       "second moment must be finite and at least 0"});
  expectRunError(resumeFrom("scale", [](SafetensorsFile &f) { f.metadata["loss_scale"] = "1e39"; }),
                 {"scale/step-000001.safetensors", "'loss_scale' is '1e39'"});
  expectRunError(
      resumeFrom("nanscale", [](SafetensorsFile &f) { f.metadata["loss_scale"] = "nan"; }),
      {"nanscale/step-000001.safetensors", "'loss_scale' is 'nan'"});
  expectRunError(resumeFrom("counter", [](SafetensorsFile &f) { f.metadata["good_steps"] = "-5"; }),
                 {"counter/step-000001.safetensors", "'good_steps' is '-5'"});
  expectRunError(resumeFrom("seed", [](SafetensorsFile &f) { f.metadata["seed"] = "-1"; }),
                 {"seed/step-000001.safetensors", "'seed' is '-1'"});

  // A file named for step 3 whose metadata says step 1.
  fs::create_directories(dir_ / "renamed");
  fs::copy_file(dir_ / good, dir_ / "renamed" / "step-000003.safetensors");
  expectRunError(
      run(train("--steps 4 --devices 1 --resume --checkpoint-dir renamed")),
      {"renamed/step-000003.safetensors", "named for step 3", "its metadata says step 1"});
}

TEST_F(TrainSafetyCli, KeepCheckpointsKeepsTheNewest) {
  Result r = run(train("--steps 5 --devices 1 --checkpoint-dir k --checkpoint-every 1 "
                       "--keep-checkpoints 2"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> steps;
  for (const auto &e : fs::directory_iterator(dir_ / "k"))
    if (e.path().extension() == ".safetensors")
      steps.push_back(e.path().filename().string());
  std::sort(steps.begin(), steps.end());
  EXPECT_EQ(steps,
            (std::vector<std::string>{"step-000004.safetensors", "step-000005.safetensors"}));
  expectUsageError(run(train("--steps 1 --keep-checkpoints 0 --checkpoint-dir k")),
                   {"--keep-checkpoints", "got '0'"});
  expectUsageError(run(train("--steps 1 --devices 1 --keep-checkpoints 2")),
                   {"--keep-checkpoints needs"});
}

TEST_F(TrainSafetyCli, MisspeltFlagsGetASuggestion) {
  Result r = run(train("--steps 1 --disable-pas SoftmaxFusionPass"));
  expectUsageError(r,
                   {"--disable-pas", "not a flag of 'kiln train'", "did you mean --disable-pass?"});
  EXPECT_EQ(r.exit_code, 2);
  expectUsageError(run("graph " + kTiny + " --bacth 2"), {"did you mean --batch?"});
  expectUsageError(run("passes list --tagret ascend910"),
                   {"not a flag of 'kiln passes list'", "did you mean --target?"});
  expectUsageError(run(train("--steps 1 --zzzzzzzzzz")), {"--zzzzzzzzzz", "see --help"});
}

TEST_F(TrainSafetyCli, AJobsBadTargetIsAnErrorNamingTheJobFile) {
  write("job.json", R"({"format": "kiln.job", "version": 1, "target": "/dev/zero"})");
  expectRunError(run("train " + kTiny + " --job job.json --compile-only"),
                 {"job.json: $.target", "unknown target '/dev/zero'"});
  // Given on the command line, the flag is what is named.
  Result r = run("train " + kTiny + " --job job.json --target /dev/zero --compile-only");
  expectUsageError(r, {"unknown target '/dev/zero'"});
  EXPECT_EQ(r.err.find("job.json"), std::string::npos) << r.err;
}

TEST_F(TrainSafetyCli, AnOddLengthTokenFileIsAnErrorNamingIt) {
  write("odd.bin", std::string(2001, 'a'));
  expectRunError(run("train " + kTiny + " --data odd.bin --steps 1 --devices 1"),
                 {"odd.bin", "2001 bytes is not a whole number of uint16 tokens"});
}

} // namespace
} // namespace kiln
