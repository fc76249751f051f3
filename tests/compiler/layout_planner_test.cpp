// kiln plan's search on the tiny Qwen: every candidate's peak is the plan
// `kiln train --compile-only` makes for its flags, the ones that fit come
// first and fastest first, and when none fits it says what would.
#include "compiler/driver/layout_planner.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <unistd.h>

#include <gtest/gtest.h>

#include "compiler/driver/layout_plan_report.h"
#include "passes/fusion/flash_attention_fusion.h"

namespace kiln::driver {
namespace {

class LayoutPlanner : public ::testing::Test {
protected:
  void SetUp() override {
    JobSettings flags;
    flags.source = "test";
    flags.target = "ascend910b";
    flags.dtype = DType::F16;
    auto job = resolveJob(std::nullopt, flags, DType::F16);
    ASSERT_TRUE(job) << job.message();
    job_ = std::make_unique<ResolvedJob>(std::move(*job));
    kernels_.dir =
        (std::filesystem::temp_directory_path() / ("kiln-planner-" + std::to_string(::getpid())))
            .string();
    request_.model = {std::string(KILN_SOURCE_DIR) + "/examples/qwen-tiny/config.json", true, 8,
                      32};
    request_.devices = 4;
  }
  void TearDown() override { std::filesystem::remove_all(*kernels_.dir); }

  // The plan kiln train --compile-only makes for the candidate's flags.
  int64_t trainPlan(const LayoutCandidate &c) {
    auto job = resolveJob(job_->spec);
    EXPECT_TRUE(job) << job.message();
    if (!job)
      return -1;
    auto program = compileTrainingProgram(request_.model, withRecompute(*job, c.recompute),
                                          kernels_, c.layout);
    EXPECT_TRUE(program) << program.message();
    return program ? program->memory.peak : -1;
  }

  std::unique_ptr<ResolvedJob> job_;
  KernelSettings kernels_;
  PlanRequest request_;
};

TEST_F(LayoutPlanner, EveryCandidateIsTheTrainPlanAndTheFastestFitComesFirst) {
  // Between the smallest plan (about 620 KiB) and the largest (2.4 MiB).
  request_.device_memory = 1 << 20;
  EXPECT_TRUE(passes::fusesAttention(*job_->context)) << "ascend910b fuses attention by default";
  auto plan = planLayouts(request_, *job_, kernels_);
  ASSERT_TRUE(plan) << plan.message();
  ASSERT_NE(plan->recommended(), nullptr);
  EXPECT_TRUE(plan->no_time.empty()) << plan->no_time;
  bool some_do_not_fit = false, seen_unfit = false;
  std::set<int> tps, pps;
  for (size_t i = 0; i < plan->candidates.size(); ++i) {
    const LayoutCandidate &c = plan->candidates[i];
    SCOPED_TRACE(c.trainFlags());
    tps.insert(c.layout.tp);
    pps.insert(c.layout.pp);
    EXPECT_EQ(c.layout.dp * c.layout.tp * c.layout.pp, 4);
    EXPECT_EQ(c.peak, trainPlan(c)) << "the planner's peak is kiln train's";
    // Sequence parallelism with every tensor-parallel group (the sequence
    // splits evenly here), and the command says so.
    EXPECT_EQ(c.layout.sequenceParallel(), c.layout.tp > 1);
    EXPECT_EQ(c.trainFlags().find("--sequence-parallel") != std::string::npos, c.layout.tp > 1);
    // ascend910b fuses attention by default: kiln train needs no flag for it.
    EXPECT_EQ(c.trainFlags().find("--enable-pass"), std::string::npos);
    EXPECT_EQ(c.fits, c.peak <= request_.device_memory);
    EXPECT_EQ(c.reason.empty(), c.fits);
    ASSERT_TRUE(c.time.has_value());
    seen_unfit |= !c.fits;
    EXPECT_FALSE(seen_unfit && c.fits) << "the ones that fit come first";
    if (i > 0 && c.fits) {
      EXPECT_LE(c.time->tokensPerSecondPerDevice(),
                plan->candidates[i - 1].time->tokensPerSecondPerDevice());
    }
    some_do_not_fit |= !c.fits;
  }
  EXPECT_TRUE(some_do_not_fit) << "choose a capacity that splits the layouts";
  EXPECT_EQ(tps, (std::set<int>{1, 2, 4}));
  EXPECT_EQ(pps, (std::set<int>{1, 2})) << "the tiny Qwen's two layers take two stages";
  EXPECT_TRUE(plan->would_fit.empty());

  const nlohmann::json j = layoutPlanToJson(request_, *job_, *plan);
  EXPECT_EQ(j["candidates"].size(), plan->candidates.size());
  for (const char *key : {"dp", "tp", "pp", "zero", "recompute", "micro_batches", "grad_accum",
                          "peak_bytes", "fits", "step_time_s", "tokens_per_s_per_device", "reason"})
    EXPECT_TRUE(j["recommended"].contains(key)) << key;
  const std::string command = j["command"];
  EXPECT_EQ(command.rfind("kiln train " + request_.model.model +
                              " --data TOKENS --steps N --devices 4 --batch 8 --seq 32 " +
                              "--dtype f16 --target ascend910b --device-memory 1MiB --tp ",
                          0),
            0u)
      << command;
}

// An eight-layer tiny Qwen whose embedding and head (4096 x 64 each) weigh
// more than six layers: beside each plain pipeline the search plans the
// interleaved one (two model stages a device) and, on four stages, the
// split that gives the first and last stages one layer each; each is the
// plan kiln train --compile-only makes for its flags, and the uneven split
// lowers the peak of the same layout.
TEST_F(LayoutPlanner, InterleavedAndUnevenPipelinesAreSearched) {
  nlohmann::json config = nlohmann::json::parse(
      std::ifstream(std::string(KILN_SOURCE_DIR) + "/examples/qwen-tiny/config.json"));
  config["num_hidden_layers"] = 8;
  config["vocab_size"] = 4096;
  const std::string model = *kernels_.dir + "-tiny8.json";
  std::ofstream(model) << config.dump();
  request_.model.model = model;
  request_.recompute = passes::RecomputeMode::None;
  auto plan = planLayouts(request_, *job_, kernels_);
  ASSERT_TRUE(plan) << plan.message();
  std::map<std::string, int64_t> peaks; // by layout, without the split
  const LayoutCandidate *uneven = nullptr;
  bool interleaved = false;
  for (const LayoutCandidate &c : plan->candidates) {
    SCOPED_TRACE(c.trainFlags());
    EXPECT_EQ(c.peak, trainPlan(c)) << "the planner's peak is kiln train's";
    if (c.layout.virtual_stages > 1) {
      interleaved = true;
      EXPECT_EQ(c.layout.virtual_stages, 2);
      EXPECT_EQ(c.layout.grad_accum % c.layout.pp, 0);
      EXPECT_NE(c.trainFlags().find("--virtual-stages 2"), std::string::npos);
    }
    if (!c.layout.stage_layers.empty()) {
      EXPECT_EQ(c.layout.stage_layers, (std::vector<int>{1, 3, 3, 1}));
      EXPECT_NE(c.trainFlags().find("--pp-layers 1,3,3,1"), std::string::npos);
      uneven = &c;
    } else if (c.layout.virtual_stages == 1) {
      peaks[c.trainFlags()] = c.peak;
    }
  }
  EXPECT_TRUE(interleaved);
  ASSERT_NE(uneven, nullptr);
  std::string balanced = uneven->trainFlags();
  balanced.erase(balanced.find(" --pp-layers 1,3,3,1"), 20);
  ASSERT_TRUE(peaks.count(balanced)) << balanced;
  EXPECT_LT(uneven->peak, peaks.at(balanced));
  std::filesystem::remove(model);
}

// The command kiln plan prints runs when pasted: the token file and the
// steps are placeholders named as such, and --device-memory reads as the
// user wrote it.
TEST_F(LayoutPlanner, TheCommandNamesItsPlaceholdersAndEchoesTheSize) {
  LayoutCandidate best;
  best.layout.devices = 4;
  best.layout.dp = 4;
  request_.device_memory = 600 << 10;
  std::string command = trainCommand(request_, *job_, best);
  EXPECT_NE(command.find(" --data TOKENS --steps N "), std::string::npos) << command;
  EXPECT_NE(command.find(" --device-memory 600KiB "), std::string::npos) << command;
  request_.device_memory = 1 << 20;
  request_.device_memory_written = "1048576";
  command = trainCommand(request_, *job_, best);
  EXPECT_NE(command.find(" --device-memory 1048576 "), std::string::npos) << command;
}

TEST_F(LayoutPlanner, WhenNothingFitsItSaysWhatWould) {
  // Below the smallest 4-device plan; 8 devices hold a smaller share each.
  request_.device_memory = 560 << 10;
  auto plan = planLayouts(request_, *job_, kernels_);
  ASSERT_TRUE(plan) << plan.message();
  EXPECT_EQ(plan->recommended(), nullptr);
  ASSERT_FALSE(plan->would_fit.empty());
  bool more_devices = false;
  for (const std::string &w : plan->would_fit)
    more_devices |= w.starts_with("8 devices: --devices 8 --tp ");
  EXPECT_TRUE(more_devices) << plan->would_fit.front();
  const std::string text = layoutPlanToText(request_, *job_, *plan);
  EXPECT_NE(text.find("nothing fits 4 x"), std::string::npos) << text;
  EXPECT_NE(text.find("needs "), std::string::npos) << text;
}

TEST_F(LayoutPlanner, AModelThatDoesNotLoadIsAnError) {
  request_.model.model = std::string(KILN_SOURCE_DIR) + "/examples/qwen-tiny/missing.json";
  auto plan = planLayouts(request_, *job_, kernels_);
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.message().find("missing.json"), std::string::npos) << plan.message();
}

} // namespace
} // namespace kiln::driver
