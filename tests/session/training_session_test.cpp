// kiln train's run without the command line: the processes' communicators,
// the log a resumed run trims, and the tiny Qwen trained, checkpointed and
// resumed through session::train, its losses those of an uninterrupted run.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/driver/job.h"
#include "session/communicators.h"
#include "session/training_log.h"
#include "session/training_session.h"
#include "support/file_io.h"

namespace kiln::session {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string &name) {
  fs::path dir = fs::temp_directory_path() / ("kiln_session_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

parallel::ParallelConfig layout(int devices, int dp, int tp, int64_t batch) {
  auto c = parallel::resolveParallelConfig(devices, dp, tp, 0, batch);
  EXPECT_TRUE(c.isOk()) << c.message();
  return *c;
}

TEST(Communicators, OneProcessDrivesEveryReplicaOutsideMpirun) {
  ASSERT_EQ(std::getenv("OMPI_COMM_WORLD_SIZE"), nullptr);
  auto comms = communicatorsFor(4, 0, layout(4, 4, 1, 4));
  ASSERT_TRUE(comms.isOk()) << comms.message();
  EXPECT_EQ(comms->replicas->worldSize(), 4);
  EXPECT_EQ(comms->replicas->localSize(), 4);
  EXPECT_EQ(comms->stages, nullptr);
  EXPECT_EQ(comms->process(), 0) << "the only process speaks for the job";
}

TEST(Communicators, AProcessHoldsWholeTensorParallelGroups) {
  // Two devices per replica (tp 2): a process of one device would split a
  // group whose collectives run in lockstep between kernels.
  auto comms = communicatorsFor(4, 1, layout(4, 2, 2, 2));
  ASSERT_FALSE(comms.isOk());
  EXPECT_NE(comms.message().find("make it a multiple of --tp 2"), std::string::npos)
      << comms.message();
}

TEST(TrainingLog, AResumedRunDropsTheLinesOfTheStepsItRedoes) {
  const fs::path path = scratch("log.jsonl");
  ASSERT_TRUE(
      writeFileAtomic(path.string(), "{\"step\":1}\n{\"step\":2}\n{\"step\":3}\n{\"st").isOk());
  ASSERT_TRUE(keepLogUpTo(path.string(), 2).isOk());
  auto text = readFile(path.string());
  ASSERT_TRUE(text.isOk());
  EXPECT_EQ(*text, "{\"step\":1}\n{\"step\":2}\n") << "step 3 and the line cut short go";
  EXPECT_TRUE(keepLogUpTo(scratch("missing.jsonl").string(), 2).isOk());
}

class TinyTraining : public ::testing::Test {
protected:
  void SetUp() override {
    auto config = frontend::readDecoderConfig(KILN_SOURCE_DIR "/examples/qwen-tiny/config.json");
    ASSERT_TRUE(config.isOk()) << config.message();
    config_ = *config;
    // A learnable sequence: each token a function of the one before.
    std::vector<uint16_t> tokens{0};
    for (int i = 0; i < 4000; ++i)
      tokens.push_back(static_cast<uint16_t>((tokens.back() * 5 + 3) % 512));
    data_ = scratch("train.bin");
    std::ofstream(data_, std::ios::binary)
        .write(reinterpret_cast<const char *>(tokens.data()),
               static_cast<std::streamsize>(tokens.size() * sizeof(uint16_t)));
    auto job = driver::resolveJob(std::nullopt, driver::JobSettings{}, driver::kDefaultModelDType);
    ASSERT_TRUE(job.isOk()) << job.message();
    job_.emplace(std::move(*job));
  }

  // The tiny Qwen on two replicas, `steps` steps of a batch of four.
  TrainingRun run(int64_t steps) const {
    TrainingRun r;
    r.model.model = KILN_SOURCE_DIR "/examples/qwen-tiny/config.json";
    r.model.training = true;
    r.model.batch = 4;
    r.model.seq = 16;
    r.kernels.dir = scratch("cache").string();
    r.config = config_;
    r.data = data_.string();
    r.devices = 2;
    r.trainer.steps = steps;
    r.trainer.device_memory = int64_t{1} << 30;
    r.trainer.loss_scale = *runtime::parseLossScale("none");
    r.trainer.schedule = {*runtime::parseSchedule("constant"), 1e-3, 1e-4, 0, steps};
    return r;
  }

  // The losses a --log-json file holds, in order.
  static std::vector<double> losses(const fs::path &log) {
    std::vector<double> out;
    std::ifstream in(log);
    for (std::string line; std::getline(in, line);)
      out.push_back(nlohmann::json::parse(line).at("loss").get<double>());
    return out;
  }

  frontend::DecoderConfig config_;
  fs::path data_;
  std::optional<driver::ResolvedJob> job_;
};

TEST_F(TinyTraining, TrainsLogsEveryStepAndMeasuresItsPlan) {
  TrainingRun r = run(3);
  r.log_json = scratch("whole.jsonl").string();
  std::ostringstream out;
  auto done = train(r, *job_, layout(2, 2, 1, 4), out);
  ASSERT_TRUE(done.isOk()) << done.message();
  EXPECT_EQ(done->steps_done, 3);
  EXPECT_FALSE(done->already_done);
  EXPECT_GT(done->measured_peak, 0);
  EXPECT_EQ(done->measured_peak, done->planned_peak) << out.str();
  EXPECT_EQ(losses(r.log_json).size(), 3u);
  EXPECT_NE(out.str().find("global batch 4"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("measured device memory peak"), std::string::npos) << out.str();
}

TEST_F(TinyTraining, AResumedRunContinuesBitForBit) {
  const parallel::ParallelConfig two = layout(2, 2, 1, 4);
  TrainingRun whole = run(4);
  whole.log_json = scratch("uninterrupted.jsonl").string();
  std::ostringstream out;
  ASSERT_TRUE(train(whole, *job_, two, out).isOk()) << out.str();

  const fs::path dir = scratch("checkpoints");
  fs::remove_all(dir);
  TrainingRun first = run(4);
  first.trainer.steps = 2; // killed after two steps: the schedule is the 4-step run's
  first.trainer.checkpoint_dir = dir.string();
  first.log_json = scratch("resumed.jsonl").string();
  ASSERT_TRUE(train(first, *job_, two, out).isOk()) << out.str();
  TrainingRun rest = run(4);
  rest.trainer.checkpoint_dir = dir.string();
  rest.trainer.resume = true;
  rest.log_json = first.log_json;
  auto resumed = train(rest, *job_, two, out);
  ASSERT_TRUE(resumed.isOk()) << resumed.message();
  EXPECT_EQ(resumed->steps_done, 4);
  EXPECT_NE(out.str().find("kiln: resumed from"), std::string::npos) << out.str();
  EXPECT_EQ(losses(rest.log_json), losses(whole.log_json));

  auto again = train(rest, *job_, two, out);
  ASSERT_TRUE(again.isOk()) << again.message();
  EXPECT_TRUE(again->already_done) << "resumed at its last step, it trains nothing";
  EXPECT_EQ(again->steps_done, 4);
}

TEST_F(TinyTraining, AMissingTokenFileIsAnErrorNamingIt) {
  TrainingRun r = run(1);
  r.data = scratch("no-such.bin").string();
  std::ostringstream out;
  auto done = train(r, *job_, layout(2, 2, 1, 4), out);
  ASSERT_FALSE(done.isOk());
  EXPECT_NE(done.message().find("no-such.bin"), std::string::npos) << done.message();
  EXPECT_TRUE(out.str().empty()) << "nothing printed before the data is read";
}

} // namespace
} // namespace kiln::session
