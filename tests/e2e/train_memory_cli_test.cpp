// kiln train's memory, as a user sees it on the tiny Qwen: a device too
// small stops with the out-of-memory report, --compile-only exits 4 when the
// plan does not fit and says which switches would, the measured peak stays
// within the plan, the update runs in buckets, and recomputation and ZeRO-2
// change no bit of the training while lowering the peak.
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/train_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using nlohmann::json;

class TrainMemoryCli : public TrainCli {};

TEST_F(TrainMemoryCli, ATooSmallDeviceIsTheOutOfMemoryReport) {
  Result r = run(train("--steps 1 --devices 8 --device-memory 512KiB"));
  EXPECT_FALSE(r.signaled);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("out of device memory"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the device has 512.0 KiB"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("largest buffers"), std::string::npos) << r.err;
}

// --compile-only prints the plan; a script tells "does not fit" (4) from
// an error (1) and from a plan that fits (0) by the exit code.
TEST_F(TrainMemoryCli, CompileOnlyExitsFourWhenThePlanDoesNotFit) {
  Result small = run("train " + kTiny + " --batch 8 --seq 16 --devices 8 --compile-only " +
                     "--device-memory 512KiB");
  EXPECT_FALSE(small.signaled);
  EXPECT_EQ(small.exit_code, 4) << small.err;
  EXPECT_NE(small.out.find("does NOT fit"), std::string::npos) << small.out;
  EXPECT_NE(small.err.find("more than the device's 512.0 KiB"), std::string::npos) << small.err;
  Result fits = run("train " + kTiny + " --batch 8 --seq 16 --devices 8 --compile-only");
  EXPECT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_NE(fits.out.find(": fits"), std::string::npos) << fits.out;
  // Where the bytes go, and the literature's figure beside it.
  // (one sequence a replica: the update sets the peak)
  EXPECT_NE(fits.out.find("at the peak (the update): weights "), std::string::npos) << fits.out;
  EXPECT_NE(fits.out.find("optimizer state"), std::string::npos) << fits.out;
  EXPECT_NE(fits.out.find("the formula for this layout (ZeRO's model states"), std::string::npos)
      << fits.out;
}

// A plan that does not fit lists the switches that lower it, each planned
// as --compile-only plans it: every one it says fits does, at that peak.
TEST_F(TrainMemoryCli, APlanThatDoesNotFitSaysWhichSwitchesWould) {
  const std::string plan =
      "train " + kTiny + " --batch 8 --seq 64 --devices 2 --compile-only " + "--device-memory 4MiB";
  Result small = run(plan);
  ASSERT_EQ(small.exit_code, 4) << small.err;
  const size_t at = small.out.find("switches that lower the peak");
  ASSERT_NE(at, std::string::npos) << small.out;
  std::istringstream lines(small.out.substr(at));
  std::string line;
  std::getline(lines, line);
  int fitting = 0;
  while (std::getline(lines, line) && line.starts_with("    ")) {
    const size_t colon = line.find(": ");
    ASSERT_NE(colon, std::string::npos) << line;
    const std::string flags = line.substr(4, colon - 4);
    const std::string peak = line.substr(colon + 2, line.find(',', colon) - colon - 2);
    Result again = run(plan + " " + flags);
    EXPECT_NE(again.out.find("per device: peak " + peak + " "), std::string::npos)
        << flags << ": " << again.out;
    if (line.ends_with(", fits")) {
      ++fitting;
      EXPECT_EQ(again.exit_code, 0) << flags << ": " << again.err;
    } else {
      EXPECT_EQ(again.exit_code, 4) << flags;
    }
  }
  EXPECT_GE(fitting, 2) << small.out; // recomputation, and micro-batches of one
  EXPECT_NE(small.out.find("    --recompute full: "), std::string::npos) << small.out;
}

// Where the update sets the peak of a mixed-precision plan, the weights'
// compute copies are one of the switches: planned without them the tiny
// Qwen in f16 on the 910B fits, and the command the suggestion names does.
TEST_F(TrainMemoryCli, AnUpdateBoundMixedPlanSuggestsCastingInTheStep) {
  const std::string plan = "train " + kTiny +
                           " --batch 8 --seq 16 --devices 2 --compile-only --target ascend910b "
                           "--precision-mode allow_mix_precision --device-memory 2900000";
  Result r = run(plan);
  ASSERT_EQ(r.exit_code, 4) << r.err;
  const size_t at = r.out.find("    --no-weight-copies: ");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_EQ(r.out.substr(r.out.find('\n', at) - 6, 6), ", fits") << r.out;
  EXPECT_EQ(run(plan + " --no-weight-copies").exit_code, 0);
}

// The plan the check above uses is what the devices then hold: measured
// while training, the peak is the plan.
TEST_F(TrainMemoryCli, TheMeasuredPeakStaysWithinThePlan) {
  Result r = run(train("--steps 2 --devices 4 --zero 1"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto [measured, planned] = measuredAndPlannedPeak(r.out);
  expectMeasuredPeakIsPlan(r.out, "--zero 1");
  EXPECT_EQ(measured, planned) << r.out;
}

// With two tokens a step the update, not the step, sets the peak: it runs in
// buckets, so it holds the state plus one bucket's new weights and moments,
// and the measured peak is the plan, with ZeRO-1 and tensor parallelism too.
TEST_F(TrainMemoryCli, TheUpdateRunsInBucketsAndItsPeakIsThePlan) {
  const std::string tiny = "train " + kTiny + " --data train.bin --batch 2 --seq 2 --steps 2 ";
  for (const char *flags : {"--devices 1", "--devices 2 --zero 1", "--devices 2 --tp 2"}) {
    Result r = run(tiny + flags);
    ASSERT_EQ(r.exit_code, 0) << flags << ": " << r.err;
    EXPECT_NE(r.out.find("; update "), std::string::npos) << r.out;
    const auto [measured, planned] = measuredAndPlannedPeak(r.out);
    expectMeasuredPeakIsPlan(r.out, flags);
    EXPECT_EQ(measured, planned) << flags << ": " << r.out;
  }
  Result plan = run(tiny + "--devices 1 --compile-only");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  // Buckets of at least the largest tensor (the embedding, lm_head).
  const size_t at = plan.out.find("update buckets: ");
  ASSERT_NE(at, std::string::npos) << plan.out;
  EXPECT_GE(std::atoi(plan.out.c_str() + at + 16), 4) << plan.out;
}

// Activation recomputation re-runs the same kernels on the same inputs: the
// losses and the final weights are bit for bit those without it, on one
// device and with tensor parallelism (the vocab-parallel layers included).
// The devices hold less (full keeps each layer's input only), and what they
// hold stays within the plan; the plan's arena adds only its packing.
TEST_F(TrainMemoryCli, RecomputationChangesNoBitAndLowersThePeak) {
  auto trainAs = [&](const std::string &name, const std::string &flags) {
    Result r = run(train("--steps 20 --checkpoint-every 20 --checkpoint-dir " + name +
                         " --log-json " + name + ".jsonl " + flags));
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
    const auto [measured, planned] = measuredAndPlannedPeak(r.out);
    expectMeasuredPeakIsPlan(r.out, name);
    const double m = formattedBytes(measured), p = formattedBytes(planned);
    EXPECT_GT(m, 0) << r.out;
    EXPECT_LE(m, p) << name << ": " << r.out;
    EXPECT_LE(p, 1.1 * m) << name << ": " << r.out; // packing, and one decimal printed
    return m;
  };
  for (const std::string layout : {"--devices 1", "--devices 2 --tp 2"}) {
    const std::string base = layout == "--devices 1" ? "one" : "tp2";
    const double none = trainAs(base, layout);
    for (const char *mode : {"selective", "full"}) {
      const std::string name = base + "-" + mode;
      const double peak = trainAs(name, layout + " --recompute " + mode);
      if (std::string(mode) == "full") {
        EXPECT_LT(peak, none) << name;
      }
      const std::vector<json> want = logLines(base + ".jsonl"), got = logLines(name + ".jsonl");
      ASSERT_EQ(got.size(), 20u) << name;
      for (size_t i = 0; i < want.size(); ++i)
        for (const char *field : {"loss", "grad_norm", "loss_scale"})
          EXPECT_EQ(got[i][field], want[i][field]) << name << " step " << i + 1 << " " << field;
      expectSameTensors(base + "/step-000020.safetensors", name + "/step-000020.safetensors");
    }
  }
}

// ZeRO-2 reduces each gradient to its owner and the others drop theirs: the
// same sums in the same order as ZeRO-1, so the losses, gradient norms,
// weights and moments are ZeRO-1's bit for bit; each device holds less, and
// what it holds stays within the plan.
TEST_F(TrainMemoryCli, ZeroTwoIsZeroOneBitForBitWithLessMemory) {
  for (const std::string layout : {"--devices 8", "--devices 8 --tp 2"}) {
    double peak[3] = {};
    for (int zero : {1, 2}) {
      const std::string name = "z" + std::to_string(zero) + (layout.size() > 11 ? "tp" : "");
      Result r =
          run(train("--steps 20 --checkpoint-every 20 --checkpoint-dir " + name + " --log-json " +
                    name + ".jsonl --zero " + std::to_string(zero) + " " + layout));
      ASSERT_EQ(r.exit_code, 0) << name << ": " << r.err;
      const auto [measured, planned] = measuredAndPlannedPeak(r.out);
      expectMeasuredPeakIsPlan(r.out, name);
      peak[zero] = formattedBytes(measured);
      EXPECT_LE(peak[zero], formattedBytes(planned)) << name << ": " << r.out;
      EXPECT_GT(peak[zero], 0) << r.out;
    }
    EXPECT_LT(peak[2], peak[1]) << layout;
    const std::string one = layout.size() > 11 ? "z1tp" : "z1",
                      two = layout.size() > 11 ? "z2tp" : "z2";
    const std::vector<json> a = logLines(one + ".jsonl"), b = logLines(two + ".jsonl");
    ASSERT_EQ(b.size(), 20u) << layout;
    for (size_t i = 0; i < a.size(); ++i)
      for (const char *field : {"loss", "grad_norm", "loss_scale"})
        EXPECT_EQ(b[i][field], a[i][field]) << layout << " step " << i + 1 << " " << field;
    expectSameTensors(one + "/step-000020.safetensors", two + "/step-000020.safetensors");
  }
}

} // namespace
} // namespace kiln
