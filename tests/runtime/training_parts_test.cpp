// The pieces of the training loop on their own: the loss scaler follows
// MindSpore's rules, the schedule warms up and decays, token data samples
// reproducibly and refuses bad files, checkpoints round-trip exactly, the
// device memory refuses what does not fit, the communicator sums in rank
// order, and ZeRO ownership balances.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "compiler/parallel/parallel_config.h"
#include "formats/safetensors.h"
#include "runtime/checkpoint.h"
#include "runtime/communicator.h"
#include "runtime/device.h"
#include "runtime/evaluation.h"
#include "runtime/loss_scaler.h"
#include "runtime/lr_schedule.h"
#include "runtime/token_data.h"
#include "support/byte_size.h"
#include "support/file_io.h"

namespace kiln::runtime {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string &name) {
  fs::path dir = fs::temp_directory_path() / ("kiln_runtime_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

TEST(LossScaler, DynamicHalvesOnOverflowAndGrowsAfterTheWindow) {
  auto spec = parseLossScale("dynamic:1024,2,3");
  ASSERT_TRUE(spec.isOk()) << spec.message();
  LossScaler s(*spec);
  EXPECT_EQ(s.scale(), 1024);
  ASSERT_TRUE(s.update(true).isOk());
  EXPECT_EQ(s.scale(), 512);
  for (int i = 0; i < 2; ++i)
    ASSERT_TRUE(s.update(false).isOk());
  EXPECT_EQ(s.scale(), 512) << "two good steps of a window of three";
  ASSERT_TRUE(s.update(false).isOk());
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_EQ(s.goodSteps(), 0);
}

TEST(LossScaler, NeverBelowOneAndStopsAfterTooManyOverflows) {
  LossScaler s(*parseLossScale("dynamic:4,2,10"));
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(s.update(true).isOk());
  EXPECT_EQ(s.scale(), 1);
  Status last = Status::ok();
  for (int64_t i = 5; i <= LossScaler::kMaxConsecutiveOverflows && last; ++i)
    last = s.update(true);
  EXPECT_FALSE(last.isOk());
  EXPECT_NE(last.message().find("in a row"), std::string::npos);
}

TEST(LossScaler, PresetsAndErrors) {
  auto defaults = parseLossScale("dynamic");
  EXPECT_EQ(defaults->init, 16777216.0);
  EXPECT_EQ(defaults->window, 2000);
  auto mf = parseLossScale("mindformers");
  EXPECT_EQ(mf->init, 65536.0);
  EXPECT_EQ(mf->factor, 2.0);
  EXPECT_EQ(mf->window, 1000);
  LossScaler fixed(*parseLossScale("fixed:128"));
  ASSERT_TRUE(fixed.update(true).isOk());
  EXPECT_EQ(fixed.scale(), 128) << "a fixed scale only drops the update";
  EXPECT_EQ(parseLossScale("none")->init, 1);
  for (const char *bad : {"dynamic:1,2", "dynamic:1,1,5", "fixed:-1", "static", "dynamic:a,b,c"})
    EXPECT_FALSE(parseLossScale(bad).isOk()) << bad;
}

TEST(LrSchedule, WarmsUpThenDecaysToTheFloor) {
  LrSchedule s{LrSchedule::Kind::Cosine, 1.0, 0.1, 4, 14};
  EXPECT_DOUBLE_EQ(s.at(0), 0.25);
  EXPECT_DOUBLE_EQ(s.at(3), 1.0);
  EXPECT_DOUBLE_EQ(s.at(4), 1.0);
  EXPECT_NEAR(s.at(9), 0.55, 1e-12) << "half way through the decay";
  EXPECT_NEAR(s.at(14), 0.1, 1e-12);
  s.kind = LrSchedule::Kind::Constant;
  EXPECT_DOUBLE_EQ(s.at(10), 1.0);
  EXPECT_FALSE(parseSchedule("linear").isOk());
}

std::string writeTokens(const std::string &name, const std::vector<uint16_t> &tokens) {
  const fs::path p = scratch(name);
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char *>(tokens.data()),
             static_cast<std::streamsize>(tokens.size() * 2));
  return p.string();
}

TEST(TokenData, SamplesReproduciblyFromTheFile) {
  std::vector<uint16_t> tokens(1000);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<uint16_t>(i % 500);
  auto data = TokenData::open(writeTokens("t.bin", tokens), TokenDType::U16, 512, 8);
  ASSERT_TRUE(data.isOk()) << data.message();
  EXPECT_EQ(data->tokens(), 1000);
  Tensor whole = data->batch(7, 3, 0, 4);
  Tensor tail = data->batch(7, 3, 2, 2);
  EXPECT_EQ(whole.shape(), (Shape{4, 8}));
  for (int64_t i = 0; i < 16; ++i)
    EXPECT_EQ(whole.getInt(16 + i), tail.getInt(i)) << "a replica's share is the same rows";
  for (int64_t s = 0; s < 4; ++s)
    for (int64_t t = 1; t < 8; ++t)
      EXPECT_EQ((whole.getInt(s * 8 + t - 1) + 1) % 500, whole.getInt(s * 8 + t))
          << "consecutive tokens of the file";
  EXPECT_FALSE(data->batch(7, 4, 0, 4) == whole) << "another step, other offsets";
}

// An evaluation reads the file in order: window i is tokens [i seq, (i + 1)
// seq), whole batches of them, at most the tokens it is given.
TEST(TokenData, EvaluationReadsConsecutiveWindows) {
  std::vector<uint16_t> tokens(100);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<uint16_t>(i);
  auto data = TokenData::open(writeTokens("w.bin", tokens), TokenDType::U16, 512, 8);
  ASSERT_TRUE(data.isOk()) << data.message();
  EXPECT_EQ(data->windows(), 12); // 100 tokens: 12 whole windows of 8
  const Tensor two = data->windows(3, 2);
  EXPECT_EQ(two.shape(), (Shape{2, 8}));
  for (int64_t i = 0; i < 16; ++i)
    EXPECT_EQ(two.getInt(i), 24 + i);
  EXPECT_EQ(*evalWindows(*data, "w.bin", 5, 0), 10); // two whole batches of 5
  EXPECT_EQ(*evalWindows(*data, "w.bin", 2, 60), 6); // 60 tokens: 7 windows, 3 batches
  auto none = evalWindows(*data, "w.bin", 16, 0);
  ASSERT_FALSE(none.isOk());
  EXPECT_NE(none.message().find("w.bin: 100 tokens hold 12 windows of 8 tokens, fewer than one "
                                "batch of 16"),
            std::string::npos)
      << none.message();
}

TEST(TokenData, BadFilesAreClearErrors) {
  const std::string odd = scratch("odd.bin").string();
  std::ofstream(odd, std::ios::binary) << "abc";
  auto r = TokenData::open(odd, TokenDType::U16, 512, 4);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.message().find("not a whole number of uint16 tokens"), std::string::npos);

  auto big = TokenData::open(writeTokens("big.bin", {1, 2, 600, 3, 4, 5}), TokenDType::U16, 512, 2);
  ASSERT_FALSE(big.isOk());
  EXPECT_NE(big.message().find("token 600 at position 2"), std::string::npos) << big.message();

  auto short_file = TokenData::open(writeTokens("short.bin", {1, 2, 3}), TokenDType::U16, 512, 8);
  ASSERT_FALSE(short_file.isOk());
  EXPECT_NE(short_file.message().find("fewer than one sequence"), std::string::npos);

  SafetensorsFile st;
  st.tensors["input_ids"] = Tensor::fromFloats(DType::F32, {4}, {1, 2, 3, 4});
  ASSERT_TRUE(writeSafetensors(scratch("f.safetensors").string(), st).isOk());
  auto floats = TokenData::open(scratch("f.safetensors").string(), TokenDType::U16, 512, 2);
  ASSERT_FALSE(floats.isOk());
  EXPECT_NE(floats.message().find("expected an integer dtype"), std::string::npos);
  EXPECT_FALSE(parseTokenDType("int8").isOk());
}

// A run killed while writing a checkpoint leaves its temporary file; the
// next checkpoint written into the folder removes it, whatever its step.
TEST(Checkpoint, WritingOneRemovesWhatAKilledRunLeft) {
  const std::string dir = scratch("ckpt-stale").string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  const pid_t dead = ::fork();
  if (dead == 0)
    ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const std::string torn = temporaryPath(dir + "/step-000007.safetensors", dead, 0);
  const std::string live = temporaryPath(dir + "/step-000008.safetensors", ::getpid(), 99);
  const std::string foreign = temporaryPath(dir + "/notes.txt", dead, 0);
  for (const std::string &p : {torn, live, foreign})
    std::ofstream(p) << "torn";
  TrainingState s;
  s.step = 9;
  s.weights["w"] = Tensor::fromFloats(DType::F32, {1}, {1});
  ASSERT_TRUE(writeCheckpoint(dir, s).isOk());
  EXPECT_FALSE(fs::exists(torn));
  EXPECT_TRUE(fs::exists(live)) << "a running process's checkpoint was removed";
  EXPECT_TRUE(fs::exists(foreign)) << "a file not a checkpoint was removed";
}

TEST(Checkpoint, RoundTripsExactlyAndFindsTheLatest) {
  const std::string dir = scratch("ckpt").string();
  fs::remove_all(dir);
  auto none = latestCheckpoint(dir);
  ASSERT_TRUE(none.isOk());
  EXPECT_FALSE(none->has_value());

  TrainingState s;
  s.updates = 6;
  s.loss_scale = 32768.5;
  s.good_steps = 3;
  s.overflows_in_a_row = 1;
  s.seed = 1234567890123ull;
  s.weights["w"] = Tensor::fromFloats(DType::F32, {2}, {0.1f, -3e-7f});
  s.moments["adam.m.w"] = Tensor::fromFloats(DType::F32, {2}, {1, 2});
  for (int64_t step : {7, 12, 9}) {
    s.step = step;
    ASSERT_TRUE(writeCheckpoint(dir, s).isOk());
  }
  std::ofstream(fs::path(dir) / "step-000099.safetensors.tmp") << "torn";
  auto latest = latestCheckpoint(dir);
  ASSERT_TRUE(latest.isOk() && latest->has_value());
  EXPECT_EQ(fs::path(**latest).filename(), "step-000012.safetensors");
  auto back = readCheckpoint(**latest);
  ASSERT_TRUE(back.isOk()) << back.message();
  EXPECT_EQ(back->step, 12);
  EXPECT_EQ(back->updates, 6);
  EXPECT_EQ(back->loss_scale, 32768.5);
  EXPECT_EQ(back->good_steps, 3);
  EXPECT_EQ(back->overflows_in_a_row, 1);
  EXPECT_EQ(back->seed, 1234567890123ull);
  EXPECT_TRUE(back->weights.at("w") == s.weights.at("w"));
  EXPECT_TRUE(back->moments.at("adam.m.w") == s.moments.at("adam.m.w"));

  SafetensorsFile plain;
  plain.tensors["w"] = s.weights["w"];
  ASSERT_TRUE(writeSafetensors(scratch("plain.safetensors").string(), plain).isOk());
  auto refused = readCheckpoint(scratch("plain.safetensors").string());
  ASSERT_FALSE(refused.isOk());
  EXPECT_NE(refused.message().find("not a kiln checkpoint"), std::string::npos);
}

TEST(DeviceMemory, RefusesWhatDoesNotFitAndNamesTheLargestBuffers) {
  DeviceMemory m("npu:3", 1000);
  ASSERT_TRUE(m.allocate("weights", 600).isOk());
  ASSERT_TRUE(m.allocate("grads", 300).isOk());
  Status s = m.allocate("activations", 200);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("npu:3: out of device memory"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("needs 1.1 KiB"), std::string::npos) << s.message();
  EXPECT_LT(s.message().find("weights: 600 B"), s.message().find("grads: 300 B"));
  EXPECT_EQ(m.live(), 900) << "nothing is counted for a refused allocation";
  m.release("grads");
  ASSERT_TRUE(m.allocate("activations", 200).isOk());
  EXPECT_EQ(m.peak(), 900);
  EXPECT_TRUE(m.holds("activations"));
}

// A replica whose update the host computed once takes the counts its own
// update would have made, and only from the same state.
TEST(DeviceMemory, ADeviceCountsAsAnotherFromTheSameState) {
  DeviceMemory first("npu:0", 1000), second("npu:1", 1000);
  for (DeviceMemory *m : {&first, &second})
    ASSERT_TRUE(m->allocate("weights", 400).isOk());
  const DeviceMemory before = first;
  ASSERT_TRUE(first.allocate("update arena", 300).isOk());
  first.release("update arena");
  ASSERT_TRUE(second.sameAs(before));
  second.countAs(first);
  EXPECT_EQ(second.peak(), 700);
  EXPECT_EQ(second.live(), 400);
  EXPECT_EQ(second.device(), "npu:1");
  ASSERT_TRUE(second.allocate("grads", 100).isOk());
  EXPECT_FALSE(second.sameAs(first)) << "a buffer more";
}

TEST(ByteSize, ParsesUnitsAndRefusesNonsense) {
  EXPECT_EQ(*parseByteSize("2GiB"), 2ull << 30);
  EXPECT_EQ(*parseByteSize("512m"), 512ull << 20);
  EXPECT_EQ(*parseByteSize("64KB"), 64ull << 10);
  EXPECT_EQ(*parseByteSize("1000"), 1000u);
  for (const char *bad : {"", "GiB", "2X", "1.5G", "99999999999999999999", "20000000000T"})
    EXPECT_FALSE(parseByteSize(bad).isOk()) << bad;
  EXPECT_EQ(formatBytes(1536), "1.5 KiB");
}

TEST(Communicator, SumsInRankOrderAndBroadcasts) {
  auto comm = makeInProcessCommunicator(3);
  // 1e8 + 1 - 1e8 in f32 depends on the order: rank order gives 0.
  std::vector<float> a{1e8f, 1}, b{1, 2}, c{-1e8f, 3};
  ASSERT_TRUE(comm->allReduceSum({a.data(), b.data(), c.data()}, 2).isOk());
  EXPECT_EQ(a, b);
  EXPECT_EQ(b, c);
  EXPECT_EQ(a[0], (1e8f + 1.0f) + -1e8f);
  EXPECT_EQ(a[1], 6);
  std::vector<float> x{1}, y{2}, z{3};
  ASSERT_TRUE(comm->broadcast({x.data(), y.data(), z.data()}, sizeof(float), 2).isOk());
  EXPECT_EQ(x[0], 3);
  EXPECT_EQ(y[0], 3);
  EXPECT_FALSE(comm->allReduceSum({a.data()}, 2).isOk());
}

// A long buffer is summed in chunks on several threads: every element
// still in rank order, the whole and the tail past the last full chunk.
TEST(Communicator, SumsALongBufferInRankOrderChunkByChunk) {
  constexpr int kRanks = 4;
  const int64_t n = 100003;
  auto comm = makeInProcessCommunicator(kRanks);
  std::vector<std::vector<float>> buffers(kRanks, std::vector<float>(n));
  for (int r = 0; r < kRanks; ++r)
    for (int64_t i = 0; i < n; ++i) // order-sensitive: large values cancel
      buffers[r][i] = (r % 2 ? -1.0f : 1.0f) * 1e7f * static_cast<float>(1 + i % 7) +
                      static_cast<float>(i % 13) * 0.37f;
  std::vector<float> expected(n);
  for (int64_t i = 0; i < n; ++i) {
    float sum = buffers[0][i];
    for (int r = 1; r < kRanks; ++r)
      sum += buffers[r][i];
    expected[i] = sum;
  }
  std::vector<float *> local;
  for (auto &b : buffers)
    local.push_back(b.data());
  const std::vector<std::vector<float>> inputs = buffers;
  ASSERT_TRUE(comm->reduceSumToFirst(local, n).isOk());
  EXPECT_EQ(buffers[0], expected);
  for (int r = 1; r < kRanks; ++r)
    EXPECT_EQ(buffers[r], inputs[r]) << "rank " << r << " is left as it was";
  buffers = inputs;
  ASSERT_TRUE(comm->allReduceSum(local, n).isOk());
  for (int r = 0; r < kRanks; ++r)
    EXPECT_EQ(buffers[r], expected) << "rank " << r;
}

TEST(ParallelConfig, ChecksTheDeviceArithmetic) {
  auto c = parallel::resolveParallelConfig(8, 0, 0, 1, 16);
  ASSERT_TRUE(c.isOk()) << c.message();
  EXPECT_EQ(c->dp, 8);
  EXPECT_EQ(c->tp, 1);
  EXPECT_EQ(c->toString(), "8 devices: dp 8 x tp 1, zero 1");
  EXPECT_NE(parallel::resolveParallelConfig(8, 4, 1, 0, 8).message().find("must agree"),
            std::string::npos);
  EXPECT_NE(parallel::resolveParallelConfig(8, 8, 1, 0, 12).message().find("multiple of 8"),
            std::string::npos);
  auto split = parallel::resolveParallelConfig(8, 0, 2, 1, 8);
  ASSERT_TRUE(split.isOk()) << split.message();
  EXPECT_EQ(split->toString(), "8 devices: dp 4 x tp 2, zero 1");
  EXPECT_NE(parallel::resolveParallelConfig(8, 0, 3, 0, 8).message().find("does not divide"),
            std::string::npos);
  EXPECT_TRUE(parallel::resolveParallelConfig(8, 8, 1, 2, 8).isOk()); // ZeRO-2
  EXPECT_TRUE(parallel::resolveParallelConfig(8, 8, 1, 3, 8).isOk()); // ZeRO-3
  EXPECT_NE(parallel::resolveParallelConfig(8, 4, 1, 3, 8, 1, 2)
                .message()
                .find("ZeRO-3 inside "
                      "pipeline stages"),
            std::string::npos);
  EXPECT_FALSE(parallel::resolveParallelConfig(8, 8, 1, 4, 8).isOk());
  auto accum = parallel::resolveParallelConfig(8, 0, 2, 0, 16, 4);
  ASSERT_TRUE(accum.isOk()) << accum.message();
  EXPECT_EQ(accum->toString(), "8 devices: dp 4 x tp 2, zero 0, grad-accum 4");
  EXPECT_NE(parallel::resolveParallelConfig(8, 0, 2, 0, 8, 4).message().find("multiple of 16"),
            std::string::npos);
  EXPECT_FALSE(parallel::resolveParallelConfig(8, 0, 2, 0, 8, 0).isOk());
}

} // namespace
} // namespace kiln::runtime
