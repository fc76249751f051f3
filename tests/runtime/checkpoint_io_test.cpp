// What a checkpoint holds of a run, on its own: the whole tensors joined
// from every tensor-parallel rank's piece and every replica's ZeRO slice,
// each device's piece and slice again when a run resumes (ZeRO-3's weights
// whole on the host), the export written before the step file, and the
// refusals: a folder with nothing to resume, other settings, a tensor of
// another shape.
#include <filesystem>
#include <unistd.h>

#include <gtest/gtest.h>

#include "ir/tensor_split.h"
#include "runtime/checkpoint_io.h"

namespace kiln::runtime {
namespace {

namespace fs = std::filesystem;

constexpr int kDp = 2, kTp = 2;

fs::path scratch(const std::string &name) {
  fs::path dir =
      fs::temp_directory_path() / ("kiln_checkpoint_io_" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

Tensor counting(DType dtype, Shape shape, float from) {
  std::vector<float> v(static_cast<size_t>(numElements(shape)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = from + static_cast<float>(i);
  return Tensor::fromFloats(dtype, std::move(shape), v);
}

// Two replicas of two tensor-parallel ranks in one process: "w" [4, 3]
// split on axis 0 and sliced by ZeRO (ZeRO-3: its weight too), "b" [5]
// replicated and updated whole.
parallel::TrainingProgram program(int zero) {
  parallel::TrainingProgram p;
  p.parallel.dp = kDp;
  p.parallel.tp = kTp;
  p.parallel.zero = zero;
  parallel::Parameter w{"w", TensorType{DType::F32, {2, 3}}, TensorSplit{0}};
  w.slice = zero > 0 ? flatSliceElements(6, kDp) : 0;
  w.weight_sliced = zero == 3;
  parallel::Parameter b{"b", TensorType{DType::F32, {5}}, TensorSplit{}};
  p.params = {w, b};
  p.signature.moment = {"adam.m.w", "adam.m.b"};
  p.signature.velocity = {"adam.v.w", "adam.v.b"};
  return p;
}

// A run's state: whole tensors, the moments non-negative as AdamW's are.
TrainingState wholeState() {
  TrainingState s;
  s.step = 5;
  s.updates = 4;
  s.loss_scale = 1024;
  s.seed = 3;
  s.settings = {{"model", "tiny"}};
  s.weights = {{"w", counting(DType::F32, {4, 3}, 1)}, {"b", counting(DType::F32, {5}, 20)}};
  s.moments = {{"adam.m.w", counting(DType::F32, {4, 3}, 30)},
               {"adam.v.w", counting(DType::F32, {4, 3}, 50)},
               {"adam.m.b", counting(DType::F32, {5}, 70)},
               {"adam.v.b", counting(DType::F32, {5}, 80)}};
  return s;
}

class CheckpointIOTest : public ::testing::TestWithParam<int> {
protected:
  const parallel::TrainingProgram p = program(GetParam());
  const DeviceLayout layout{kTp, /*pp=*/1, 0, /*local_replicas=*/kDp};
  std::unique_ptr<Communicator> comm = makeInProcessCommunicator(kDp);
  ZeroSharder zero{p.params, kDp, GetParam(), layout, *comm};
  CheckpointIO io{p, layout, zero, *comm, /*link=*/nullptr};
  std::vector<ops::TensorMap> weights = std::vector<ops::TensorMap>(layout.devices());
  std::vector<ops::TensorMap> moments = emptyMoments();

  std::vector<ops::TensorMap> emptyMoments() const {
    std::vector<ops::TensorMap> m(layout.devices());
    for (ops::TensorMap &device : m)
      for (const char *name : {"adam.m.w", "adam.v.w", "adam.m.b", "adam.v.b"})
        device[name] = Tensor();
    return m;
  }
};

TEST_P(CheckpointIOTest, EachDeviceResumesWithItsPieceAndSlice) {
  const TrainingState s = wholeState();
  ASSERT_TRUE(io.restore(s, "step-5", weights, moments).isOk());
  for (int d = 0; d < layout.devices(); ++d) {
    const int t = layout.tpRankOf(d);
    const Tensor w = takeShard(s.weights.at("w"), TensorSplit{0}, t, kTp);
    EXPECT_TRUE(weights[d].at("w") == (GetParam() == 3 ? zero.sliceOf(w, d) : w)) << d;
    EXPECT_TRUE(weights[d].at("b") == s.weights.at("b")) << "replicated";
    const Tensor m = takeShard(s.moments.at("adam.m.w"), TensorSplit{0}, t, kTp);
    EXPECT_TRUE(moments[d].at("adam.m.w") == (GetParam() > 0 ? zero.sliceOf(m, d) : m)) << d;
    EXPECT_TRUE(moments[d].at("adam.v.b") == s.moments.at("adam.v.b")) << "b is not sliced";
  }
  if (GetParam() == 3) {
    for (int t = 0; t < kTp; ++t) {
      EXPECT_TRUE(zero.whole(t, "w") == takeShard(s.weights.at("w"), TensorSplit{0}, t, kTp))
          << "ZeRO-3's piece whole on the host";
    }
  }
}

TEST_P(CheckpointIOTest, WhatIsCollectedIsWhatWasRestored) {
  const TrainingState s = wholeState();
  ASSERT_TRUE(io.restore(s, "step-5", weights, moments).isOk());
  TrainingState collected;
  ASSERT_TRUE(io.collect(weights, moments, collected).isOk());
  ASSERT_EQ(collected.weights.size(), s.weights.size());
  for (const auto &[name, t] : s.weights)
    EXPECT_TRUE(collected.weights.at(name) == t) << name;
  ASSERT_EQ(collected.moments.size(), s.moments.size());
  for (const auto &[name, t] : s.moments)
    EXPECT_TRUE(collected.moments.at(name) == t) << name;
}

TEST_P(CheckpointIOTest, ARunResumesFromTheFileItWrote) {
  const fs::path dir = scratch("resume" + std::to_string(GetParam()));
  TrainingState s = wholeState();
  ASSERT_TRUE(io.writes());
  bool exported = false;
  auto exporter = [&](const std::string &path, const TrainingState &state) {
    EXPECT_FALSE(fs::exists(path)) << "the export comes before the step file";
    EXPECT_EQ(state.step, 5);
    exported = true;
    return Status::ok();
  };
  ASSERT_TRUE(CheckpointIO::write(s, dir.string(), /*keep=*/0, exporter).isOk());
  EXPECT_TRUE(exported);
  auto path = CheckpointIO::resumePoint(dir.string(), /*if_exists=*/false);
  ASSERT_TRUE(path.isOk()) << path.message();
  EXPECT_EQ(*path, checkpointPath(dir.string(), 5));
  auto read = CheckpointIO::readForResume(*path, s.settings, false);
  ASSERT_TRUE(read.isOk()) << read.message();
  EXPECT_EQ(read->updates, 4);
  EXPECT_EQ(read->seed, 3u);
  ASSERT_TRUE(io.restore(*read, *path, weights, moments).isOk());
  TrainingState again;
  ASSERT_TRUE(io.collect(weights, moments, again).isOk());
  for (const auto &[name, t] : s.weights)
    EXPECT_TRUE(again.weights.at(name) == t) << name;
  for (const auto &[name, t] : s.moments)
    EXPECT_TRUE(again.moments.at(name) == t) << name;
}

INSTANTIATE_TEST_SUITE_P(Zero, CheckpointIOTest, ::testing::Values(0, 1, 3),
                         [](const auto &info) { return "zero" + std::to_string(info.param); });

TEST(CheckpointIO, ResumingRefusesAnEmptyFolderOtherSettingsAndOtherShapes) {
  const fs::path dir = scratch("refusals");
  EXPECT_FALSE(CheckpointIO::resumePoint(dir.string(), /*if_exists=*/false).isOk());
  auto none = CheckpointIO::resumePoint(dir.string(), /*if_exists=*/true);
  ASSERT_TRUE(none.isOk()) << none.message();
  EXPECT_TRUE(none->empty()) << "--resume-if-exists: start afresh";

  TrainingState s = wholeState();
  ASSERT_TRUE(CheckpointIO::write(s, dir.string(), 0, nullptr).isOk());
  const std::string path = checkpointPath(dir.string(), 5);
  EXPECT_FALSE(CheckpointIO::readForResume(path, {{"model", "other"}}, false).isOk());
  EXPECT_TRUE(CheckpointIO::readForResume(path, {{"model", "other"}}, true).isOk())
      << "--resume-any-settings";

  const parallel::TrainingProgram p = program(0);
  const DeviceLayout layout{kTp, 1, 0, kDp};
  auto comm = makeInProcessCommunicator(kDp);
  ZeroSharder zero{p.params, kDp, 0, layout, *comm};
  const CheckpointIO io{p, layout, zero, *comm, nullptr};
  s.weights["w"] = counting(DType::F32, {4, 4}, 0);
  std::vector<ops::TensorMap> weights(layout.devices()), moments(layout.devices());
  const Status wrong = io.restore(s, path, weights, moments);
  ASSERT_FALSE(wrong.isOk());
  EXPECT_EQ(wrong.message().rfind(path, 0), 0u) << "the error names the checkpoint first";
}

} // namespace
} // namespace kiln::runtime
