// runtime::Trainer built directly, without kiln train: the compiled program
// of the tiny Qwen, an in-process communicator, token data and initial
// weights. Its replicas train as one device does, ZeRO-1's slices update as
// whole weights do, every device's measured peak is its plan, and an
// overflow skips the update everywhere and halves the scale.
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <gtest/gtest.h>

#include "compiler/driver/training.h"
#include "compiler/frontend/decoder_config.h"
#include "compiler/frontend/decoder_init.h"
#include "runtime/communicator.h"
#include "runtime/trainer.h"

namespace kiln::runtime {
namespace {

namespace fs = std::filesystem;

const std::string kTiny = KILN_SOURCE_DIR "/examples/qwen-tiny/config.json";

fs::path scratch(const std::string &name) {
  fs::path dir = fs::temp_directory_path() / ("kiln_trainer_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

class TrainerTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    // A learnable sequence: each token a function of the one before.
    std::vector<uint16_t> tokens{0};
    for (int i = 0; i < 4000; ++i)
      tokens.push_back(static_cast<uint16_t>((tokens.back() * 5 + 3 + i % 3) % 512));
    std::ofstream(scratch("train.bin"), std::ios::binary)
        .write(reinterpret_cast<const char *>(tokens.data()),
               static_cast<std::streamsize>(tokens.size() * sizeof(uint16_t)));
  }

  // The step records of `steps` steps of the tiny Qwen, a global batch of
  // four sequences of 16, on `devices` devices as `dp` x `tp` with ZeRO
  // `zero`; `trainer_out` (when given) keeps the trainer.
  std::vector<StepRecord> train(int devices, int dp, int tp, int zero, int64_t steps,
                                TrainerOptions options = unscaled(),
                                std::unique_ptr<Trainer> *trainer_out = nullptr) {
    auto config = frontend::readDecoderConfig(kTiny);
    EXPECT_TRUE(config.isOk()) << config.message();
    driver::JobSettings settings;
    settings.precision_mode = precision_;
    auto job = driver::resolveJob(std::nullopt, settings, driver::kDefaultModelDType);
    EXPECT_TRUE(job.isOk()) << job.message();
    auto layout = parallel::resolveParallelConfig(devices, dp, tp, zero, 4);
    EXPECT_TRUE(layout.isOk()) << layout.message();
    layout->weight_copies = weight_copies_;
    driver::ModelRequest model;
    model.model = kTiny;
    model.training = true;
    model.batch = 4;
    model.seq = 16;
    driver::KernelSettings kernels;
    kernels.dir = scratch("cache").string();
    auto program = driver::compileTrainingProgram(model, *job, kernels, *layout);
    EXPECT_TRUE(program.isOk()) << program.message();
    auto data = TokenData::open(scratch("train.bin").string(), TokenDType::U16, 512, 16);
    EXPECT_TRUE(data.isOk()) << data.message();
    data_.emplace(std::move(*data));
    options.steps = steps;
    options.device_memory = int64_t{1} << 30;
    options.schedule = {LrSchedule::Kind::Constant, 1e-3, 1e-3, 0, steps};
    auto trainer =
        Trainer::create(std::move(*program), options, makeInProcessCommunicator(layout->dp),
                        frontend::initDecoderWeights(*config, 0), *data_);
    EXPECT_TRUE(trainer.isOk()) << trainer.message();
    std::vector<StepRecord> records;
    if (!trainer.isOk())
      return records;
    Status ran = (*trainer)->run([&](const StepRecord &r) {
      records.push_back(r);
      return Status::ok();
    });
    EXPECT_TRUE(ran.isOk()) << ran.message();
    if (trainer_out)
      *trainer_out = std::move(*trainer);
    return records;
  }

  // Options without loss scaling.
  static TrainerOptions unscaled() {
    TrainerOptions options;
    options.loss_scale = *parseLossScale("none");
    return options;
  }

  std::optional<TokenData> data_;
  std::optional<passes::PrecisionMode> precision_; // the job's; none: f32 throughout
  bool weight_copies_ = true;
};

TEST_F(TrainerTest, ReplicasTrainAsOneDeviceAndZeroSlicesAsWholeWeights) {
  const std::vector<StepRecord> one = train(1, 1, 1, 0, 3);
  const std::vector<StepRecord> two = train(2, 2, 1, 0, 3);
  const std::vector<StepRecord> zero1 = train(2, 2, 1, 1, 3);
  ASSERT_EQ(one.size(), 3u);
  ASSERT_EQ(two.size(), 3u);
  ASSERT_EQ(zero1.size(), 3u);
  for (size_t s = 0; s < one.size(); ++s) {
    // Two replicas sum their halves of the batch: the same gradient, summed
    // in another order.
    EXPECT_NEAR(two[s].loss, one[s].loss, 1e-5 * std::abs(one[s].loss)) << "step " << s + 1;
    EXPECT_NEAR(two[s].grad_norm, one[s].grad_norm, 1e-4 * one[s].grad_norm) << "step " << s + 1;
    // ZeRO-1 updates each replica's slice of the same summed gradient.
    EXPECT_EQ(zero1[s].loss, two[s].loss) << "step " << s + 1;
    EXPECT_EQ(zero1[s].grad_norm, two[s].grad_norm) << "step " << s + 1;
  }
  EXPECT_LT(one.back().loss, one.front().loss) << "it learns";
}

TEST_F(TrainerTest, EveryDeviceOfTheLayoutMeasuresItsPlan) {
  std::unique_ptr<Trainer> trainer;
  ASSERT_EQ(train(4, 2, 2, 0, 1, unscaled(), &trainer).size(), 1u);
  ASSERT_NE(trainer, nullptr);
  EXPECT_EQ(trainer->localDevices(), 4) << "two replicas of two tensor-parallel ranks";
  EXPECT_EQ(trainer->stepsDone(), 1);
  for (int d = 0; d < trainer->localDevices(); ++d)
    EXPECT_EQ(trainer->memory(d).peak(), trainer->plannedPeak()) << "npu:" << d;
}

TEST_F(TrainerTest, AnOverflowSkipsTheUpdateOnEveryReplicaAndHalvesTheScale) {
  TrainerOptions options;
  options.loss_scale = *parseLossScale("dynamic:1024,2,1000");
  options.inject_overflow_step = 1; // the second step, 0-based
  const std::vector<StepRecord> r = train(2, 2, 1, 0, 3, options);
  TrainerOptions no_overflow;
  no_overflow.loss_scale = options.loss_scale;
  const std::vector<StepRecord> clean = train(2, 2, 1, 0, 3, no_overflow);
  ASSERT_EQ(r.size(), 3u);
  ASSERT_EQ(clean.size(), 3u);
  EXPECT_FALSE(r[0].overflow);
  EXPECT_TRUE(r[1].overflow);
  EXPECT_FALSE(r[2].overflow);
  EXPECT_EQ(r[1].loss_scale, 1024);
  EXPECT_EQ(r[2].loss_scale, 512);
  // The overflow comes after the forward: the step's loss is the clean
  // run's; its update is skipped, so the next step's loss is not.
  EXPECT_EQ(r[0].loss, clean[0].loss);
  EXPECT_EQ(r[1].loss, clean[1].loss);
  EXPECT_NE(r[2].loss, clean[2].loss);
}

// Under bf16 mixed precision the devices keep the weights' bf16 copies and
// the update writes them: the step reads them instead of casting, with the
// same bits as the step's own Casts, on one device and on replicas that
// share one update; every device's measured peak is still its plan, and a
// run resumed from a checkpoint makes its copies again and ends as an
// unbroken one.
TEST_F(TrainerTest, WeightCopiesTrainAsTheStepsOwnCasts) {
  precision_ = passes::PrecisionMode::AllowMixPrecisionBf16;
  const std::string copy = "compute.transformer.h.0.attn.c_attn.weight";
  for (int dp : {1, 2}) {
    std::unique_ptr<Trainer> trainer;
    weight_copies_ = true;
    const std::vector<StepRecord> with = train(dp, dp, 1, 0, 3, unscaled(), &trainer);
    ASSERT_NE(trainer, nullptr);
    for (int d = 0; d < trainer->localDevices(); ++d) {
      EXPECT_TRUE(trainer->memory(d).holds(copy)) << "npu:" << d;
      EXPECT_EQ(trainer->memory(d).peak(), trainer->plannedPeak()) << "npu:" << d;
    }
    weight_copies_ = false;
    const std::vector<StepRecord> without = train(dp, dp, 1, 0, 3, unscaled(), &trainer);
    ASSERT_NE(trainer, nullptr);
    EXPECT_FALSE(trainer->memory(0).holds(copy));
    ASSERT_EQ(with.size(), 3u);
    ASSERT_EQ(without.size(), 3u);
    for (size_t s = 0; s < with.size(); ++s) {
      EXPECT_EQ(with[s].loss, without[s].loss) << "dp " << dp << ", step " << s + 1;
      EXPECT_EQ(with[s].grad_norm, without[s].grad_norm) << "dp " << dp << ", step " << s + 1;
    }
  }

  weight_copies_ = true;
  const fs::path unbroken = scratch("copies_unbroken"), resumed = scratch("copies_resumed");
  fs::remove_all(unbroken);
  fs::remove_all(resumed);
  TrainerOptions options = unscaled();
  options.checkpoint_dir = unbroken.string();
  options.checkpoint_every = 2;
  const std::vector<StepRecord> whole = train(1, 1, 1, 0, 4, options);
  ASSERT_EQ(whole.size(), 4u);
  fs::create_directories(resumed);
  fs::copy_file(unbroken / "step-000002.safetensors", resumed / "step-000002.safetensors");
  options.checkpoint_dir = resumed.string();
  options.resume = true;
  const std::vector<StepRecord> rest = train(1, 1, 1, 0, 4, options);
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].loss, whole[2].loss) << "step 3 reads the copies of step 2's weights";
  EXPECT_EQ(rest[1].loss, whole[3].loss);
}

} // namespace
} // namespace kiln::runtime
