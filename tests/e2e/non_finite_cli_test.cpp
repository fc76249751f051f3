// NaN or inf in weights, an adapter or optimizer state is refused where it
// enters training or a merge, naming the file, the tensor and the first bad
// element; kiln run reports it in one warning line and runs anyway (the
// user may be debugging the overflow that wrote it).
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "formats/hf_checkpoint.h"
#include "formats/safetensors.h"
#include "tests/e2e/train_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr const char *kLayerNorm = "transformer.h.0.ln_1.weight";

class NonFiniteCli : public TrainCli {
protected:
  void SetUp() override {
    TrainCli::SetUp();
    ASSERT_EQ(run("init " + kTiny + " -o w.st --seed 3").exit_code, 0);
  }

  // A copy of `from` (a safetensors file in the test's folder) with element
  // `k` of `tensor` set to `value`.
  void writeWithValue(const std::string &from, const std::string &to, const std::string &tensor,
                      int64_t k, float value) {
    auto file = readSafetensors(path(from));
    ASSERT_TRUE(file.isOk()) << file.message();
    ASSERT_TRUE(file->tensors.count(tensor)) << from << " has no " << tensor;
    file->tensors.at(tensor).setFloat(k, value, OverflowMode::InfNan);
    ASSERT_TRUE(writeSafetensors(path(to), *file));
  }

  // A PEFT adapter folder `name` written by a one-step LoRA run, with a NaN
  // in its first A when `damaged`; returns that tensor's name.
  std::string writeAdapter(const std::string &name, bool damaged) {
    if (!fs::exists(dir_ / "lora" / "step-000001-adapter")) {
      Result r = run(train("--steps 1 --devices 1 --lora-rank 4 --checkpoint-dir lora"));
      EXPECT_EQ(r.exit_code, 0) << r.err;
    }
    fs::copy(dir_ / "lora" / "step-000001-adapter", dir_ / name);
    auto file = readSafetensors(path(name + "/adapter_model.safetensors"));
    EXPECT_TRUE(file.isOk()) << file.message();
    const std::string first = file->tensors.begin()->first;
    if (damaged)
      writeWithValue(name + "/adapter_model.safetensors", name + "/adapter_model.safetensors",
                     first, 0, kNaN);
    return first;
  }
};

TEST_F(NonFiniteCli, TrainRefusesWeightsHoldingNaNOrInf) {
  writeWithValue("w.st", "nan.st", kLayerNorm, 3, kNaN);
  expectRunError(run(train("--steps 1 --devices 1 --weights nan.st")),
                 {"nan.st: tensor '" + std::string(kLayerNorm) + "' element 3 is nan",
                  "training cannot start from NaN or inf"});
  writeWithValue("w.st", "inf.st", "lm_head.weight", 7, -kInf);
  expectRunError(run(train("--steps 1 --devices 1 --weights inf.st")),
                 {"inf.st: tensor 'lm_head.weight' element 7 is -inf"});
  // A sharded checkpoint: the error names the shard that holds it.
  auto weights = readSafetensors(path("inf.st"));
  ASSERT_TRUE(weights.isOk());
  auto shards = writeHfWeights(path("sharded"), weights->tensors, 100'000);
  ASSERT_TRUE(shards.isOk()) << shards.message();
  std::string holder;
  for (const std::string &shard : *shards) {
    auto file = readSafetensors(shard);
    if (file.isOk() && file->tensors.count("lm_head.weight"))
      holder = "sharded/" + fs::path(shard).filename().string();
  }
  ASSERT_FALSE(holder.empty());
  expectRunError(run(train("--steps 1 --devices 1 --weights sharded")),
                 {holder + ": tensor 'lm_head.weight' element 7 is -inf"});
}

TEST_F(NonFiniteCli, TrainAndMergeRefuseAnAdapterHoldingNaN) {
  const std::string tensor = writeAdapter("bad", true);
  expectRunError(run(train("--steps 2 --devices 1 --lora bad")),
                 {"bad/adapter_model.safetensors: tensor '" + tensor + "' element 0 is nan",
                  "training cannot start from NaN or inf"});
  expectRunError(run("merge " + kTiny + " --weights w.st --lora bad -o merged"),
                 {"bad/adapter_model.safetensors: tensor '" + tensor + "' element 0 is nan",
                  "the merged model would hold it"});
  EXPECT_FALSE(fs::exists(dir_ / "merged"));
  // A finite adapter on weights holding a NaN: refused too, naming the weights.
  writeAdapter("good", false);
  writeWithValue("w.st", "nan.st", kLayerNorm, 3, kNaN);
  expectRunError(run("merge " + kTiny + " --weights nan.st --lora good -o merged"),
                 {"nan.st: tensor '" + std::string(kLayerNorm) + "' element 3 is nan"});
  EXPECT_FALSE(fs::exists(dir_ / "merged"));
  Result merged = run("merge " + kTiny + " --weights w.st --lora good -o merged");
  EXPECT_EQ(merged.exit_code, 0) << merged.err;
}

TEST_F(NonFiniteCli, RunReportsNaNAndRunsAnyway) {
  ASSERT_EQ(run("make-inputs " + kTiny + " --batch 1 --seq 8 -o in.st").exit_code, 0);
  writeWithValue("w.st", "nan.st", kLayerNorm, 3, kNaN);
  for (const char *extra : {"", "--reference"}) {
    Result r = run("run " + kTiny + " --weights nan.st --inputs in.st --outputs o.st " + extra);
    EXPECT_EQ(r.exit_code, 0) << extra << ": " << r.err;
    EXPECT_EQ(r.err.rfind("kiln: warning: nan.st: tensor '" + std::string(kLayerNorm) +
                              "' element 3 is nan; running anyway",
                          0),
              0u)
        << r.err;
    EXPECT_NE(r.out.find("loss "), std::string::npos) << r.out;
  }
  const std::string tensor = writeAdapter("bad", true);
  Result r = run("run " + kTiny + " --weights w.st --inputs in.st --outputs o.st --lora bad");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("kiln: warning: bad/adapter_model.safetensors: tensor '" + tensor +
                       "' element 0 is nan; running anyway"),
            std::string::npos)
      << r.err;
}

TEST_F(NonFiniteCli, ResumingFromACheckpointWithANaNMomentIsRefused) {
  ASSERT_EQ(run(train("--steps 1 --devices 1 --checkpoint-dir c")).exit_code, 0);
  const std::string moment = "adam.m." + std::string(kLayerNorm);
  writeWithValue("c/step-000001.safetensors", "c/step-000001.safetensors", moment, 2, kNaN);
  expectRunError(run(train("--steps 2 --devices 1 --resume --checkpoint-dir c")),
                 {"c/step-000001.safetensors: tensor '" + moment + "' element 2 is nan",
                  "the checkpoint is damaged"});
}

} // namespace
} // namespace kiln
