// `kiln train` under tensor parallelism that does not split a model
// evenly: fewer key/value heads than ranks (each head replicated over the
// ranks that use it, as Megatron does) and a vocabulary the ranks do not
// divide (padded, the padding never trained, saved or loaded). Each trains
// as one device does, measures the peak it plans, checkpoints whole
// Hugging Face tensors that load at another tensor-parallel size, resumes
// bit for bit, and across MPI processes equals one process bit for bit.
#include <array>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/frontend/lora_adapter.h"
#include "formats/safetensors.h"
#include "tests/e2e/train_fixture.h"
#include "tests/support/codegen_test_util.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using nlohmann::json;

class UnevenTpCli : public TrainCli {
protected:
  // The tiny Qwen2 (or `family`) with other widths, heads and vocabulary;
  // its path.
  std::string model(const std::string &name, int hidden, int heads, int kv_heads, int intermediate,
                    int64_t vocab, const std::string &family = "qwen2-tiny") {
    json config = json::parse(slurp(kSource + "/examples/" + family + "/config.json"));
    config["hidden_size"] = hidden;
    config["num_attention_heads"] = heads;
    config["num_key_value_heads"] = kv_heads;
    config["intermediate_size"] = intermediate;
    config["vocab_size"] = vocab;
    write(name + ".json", config.dump());
    return path(name + ".json");
  }

  // `model` trained 8 steps with `flags` into the folder `name`
  // (checkpoints at 4 and 8), logged to name.jsonl; its output. The rate is
  // small because AdamW turns an element's near-zero gradient (a sum that
  // cancels) into a step of about the rate whatever its rounding, so runs
  // that round alike only to f32 may end a fraction of the rate apart.
  std::string trainAs(const std::string &model, const std::string &name, const std::string &flags) {
    Result r =
        run("train " + model + " --data train.bin --batch 4 --seq 16 --lr 1e-3 --steps 8 " + flags +
            " --checkpoint-every 4 --checkpoint-dir " + name + " --log-json " + name + ".jsonl");
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
    return r.out;
  }

  // The run `name` logged the losses and gradient norms of `want` within
  // 1e-5 (the gradient norms within 1e-4), and ended with its weights and moments within 1e-4.
  void expectAsOneDevice(const std::string &want, const std::string &name) {
    const std::vector<json> one = logLines(want + ".jsonl"), got = logLines(name + ".jsonl");
    ASSERT_EQ(got.size(), one.size()) << name;
    for (size_t i = 0; i < one.size(); ++i)
      for (const auto &[field, tolerance] : {std::pair{"loss", 1e-5}, {"grad_norm", 1e-4}}) {
        const double w = one[i][field];
        EXPECT_NEAR(got[i][field].get<double>(), w, tolerance * w)
            << name << " step " << i + 1 << " " << field;
      }
    expectNearTensors(want + "/step-000008.safetensors", name + "/step-000008.safetensors", 1e-4);
  }
};

TEST_F(UnevenTpCli, FewerKeyValueHeadsThanRanksTrainAsOneDevice) {
  // 8 query heads sharing 2 key/value heads over 4 ranks; 4 sharing 1 over 2.
  const std::string kv2 = model("kv2", 64, 8, 2, 128, 512);
  const std::string kv1 = model("kv1", 64, 4, 1, 128, 512);
  trainAs(kv2, "kv2-one", "--devices 1");
  for (const auto &[name, flags] : std::vector<std::pair<std::string, std::string>>{
           {"kv2-tp4", "--devices 4 --tp 4"},
           {"kv2-tp4dp2", "--devices 8 --tp 4 --zero 1"},
           {"kv2-tp4-sp", "--devices 4 --tp 4 --sequence-parallel"}}) {
    expectMeasuredPeakIsPlan(trainAs(kv2, name, flags), name);
    expectAsOneDevice("kv2-one", name);
  }
  trainAs(kv1, "kv1-one", "--devices 1");
  for (const auto &[name, flags] : std::vector<std::pair<std::string, std::string>>{
           {"kv1-tp2", "--devices 2 --tp 2"},
           {"kv1-tp2dp2-zero3", "--devices 4 --tp 2 --zero 3"},
           {"kv1-pp2tp2", "--devices 4 --pp 2 --tp 2 --micro-batches 2"}}) {
    expectMeasuredPeakIsPlan(trainAs(kv1, name, flags), name);
    expectAsOneDevice("kv1-one", name);
  }
  // LoRA on the replicated projections trains as one device, and its
  // adapter holds each head's B once: k_proj's is [2 heads x 8, rank 4].
  const std::string lora = " --lora-rank 4 --lora-targets k_proj,v_proj";
  trainAs(kv2, "kv2-lora-one", "--devices 1" + lora);
  expectMeasuredPeakIsPlan(trainAs(kv2, "kv2-lora-tp4", "--devices 4 --tp 4" + lora), "lora");
  const std::vector<json> one = logLines("kv2-lora-one.jsonl"),
                          got = logLines("kv2-lora-tp4.jsonl");
  ASSERT_EQ(got.size(), one.size());
  for (size_t i = 0; i < one.size(); ++i)
    EXPECT_NEAR(got[i]["loss"].get<double>(), one[i]["loss"].get<double>(),
                1e-5 * one[i]["loss"].get<double>())
        << "LoRA step " << i + 1;
  auto want = frontend::readLoraAdapter(path("kv2-lora-one/step-000008-adapter"));
  auto adapter = frontend::readLoraAdapter(path("kv2-lora-tp4/step-000008-adapter"));
  ASSERT_TRUE(want.isOk() && adapter.isOk()) << adapter.message();
  const std::string b = "base_model.model.model.layers.1.self_attn.k_proj.lora_B.weight";
  ASSERT_TRUE(adapter->tensors.count(b));
  EXPECT_EQ(adapter->tensors.at(b).shape(), (Shape{16, 4}));
  EXPECT_EQ(compareTensors(adapter->tensors.at(b), want->tensors.at(b), 1e-4, 1e-4), "");

  // Resumed from the replicated heads' checkpoint of step 4, the run ends
  // where the unbroken one did, bit for bit.
  fs::create_directories(dir_ / "resumed");
  fs::copy_file(dir_ / "kv2-tp4dp2" / "step-000004.safetensors",
                dir_ / "resumed" / "step-000004.safetensors");
  Result resumed = run("train " + kv2 +
                       " --data train.bin --batch 4 --seq 16 --lr 1e-3 --steps 8 --devices 8 "
                       "--tp 4 --zero 1 --checkpoint-dir resumed --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  expectSameTensors("kv2-tp4dp2/step-000008.safetensors", "resumed/step-000008.safetensors");
}

TEST_F(UnevenTpCli, APaddedVocabularyTrainsAsOneDeviceAndIsNeverSaved) {
  // 1000 words over 3 ranks (padded to 1152); 515 over 2 (768) and 4 (1024,
  // the 2 key/value heads replicated too).
  const std::string v1000 = model("v1000", 48, 6, 3, 96, 1000);
  const std::string v515 = model("v515", 64, 4, 2, 128, 515);
  trainAs(v1000, "v1000-one", "--devices 1");
  for (const auto &[name, flags] : std::vector<std::pair<std::string, std::string>>{
           {"v1000-tp3", "--devices 3 --tp 3"}, {"v1000-tp3dp2", "--devices 6 --tp 3 --zero 1"}}) {
    expectMeasuredPeakIsPlan(trainAs(v1000, name, flags), name);
    expectAsOneDevice("v1000-one", name);
  }
  trainAs(v515, "v515-one", "--devices 1");
  for (const auto &[name, flags] : std::vector<std::pair<std::string, std::string>>{
           {"v515-tp2", "--devices 2 --tp 2"},
           {"v515-tp4", "--devices 4 --tp 4"},
           {"v515-tp2-sp", "--devices 2 --tp 2 --sequence-parallel"}}) {
    expectMeasuredPeakIsPlan(trainAs(v515, name, flags), name);
    expectAsOneDevice("v515-one", name);
  }
  // Qwen3's tied embedding, padded, read by the first stage and the last.
  const std::string tied = model("tied", 64, 4, 2, 128, 515, "qwen3-tiny");
  trainAs(tied, "tied-one", "--devices 1");
  for (const auto &[name, flags] : std::vector<std::pair<std::string, std::string>>{
           {"tied-tp2", "--devices 2 --tp 2"},
           {"tied-pp2tp2", "--devices 4 --pp 2 --tp 2 --micro-batches 2"}}) {
    expectMeasuredPeakIsPlan(trainAs(tied, name, flags), name);
    expectAsOneDevice("tied-one", name);
  }

  // The checkpoint holds the 1000 rows, the moments too: no padding.
  auto saved = readSafetensors(path("v1000-tp3/step-000008.safetensors"));
  ASSERT_TRUE(saved.isOk()) << saved.message();
  for (const std::string name : {"model.embed_tokens.weight", "lm_head.weight",
                                 "adam.m.lm_head.weight", "adam.v.model.embed_tokens.weight"})
    EXPECT_EQ(saved->tensors.at(name).shape(), (Shape{1000, 48})) << name;

  // A checkpoint written at TP1 resumes at TP3, and one written at TP3 at
  // TP1, each ending where its unbroken run did.
  for (const auto &[from, to, flags] :
       std::vector<std::array<std::string, 3>>{{"v1000-one", "tp1-to-tp3", "--devices 3 --tp 3"},
                                               {"v1000-tp3", "tp3-to-tp1", "--devices 1"}}) {
    fs::create_directories(dir_ / to);
    fs::copy_file(dir_ / from / "step-000004.safetensors", dir_ / to / "step-000004.safetensors");
    Result r = run("train " + v1000 + " --data train.bin --batch 4 --seq 16 --lr 1e-3 --steps 8 " +
                   flags + " --checkpoint-dir " + to + " --resume --resume-any-settings");
    ASSERT_EQ(r.exit_code, 0) << to << ": " << r.err;
    expectNearTensors(from + "/step-000008.safetensors", to + "/step-000008.safetensors", 1e-4);
  }
}

// Two MPI processes, each one tensor-parallel group of four ranks whose
// two key/value heads are replicated (and a padded vocabulary of 515),
// equal one process bit for bit.
TEST_F(UnevenTpCli, MpiEqualsOneProcess) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "OpenMPI's mpirun is not installed";
  const std::string v515 = model("v515", 64, 4, 2, 128, 515);
  const std::string train = "train " + v515 +
                            " --data train.bin --batch 4 --seq 16 --lr 1e-2 --steps 4 "
                            "--checkpoint-every 4 --devices 8 --tp 4 --zero 1 ";
  ASSERT_EQ(run(train + "--log-json one.jsonl --checkpoint-dir one").exit_code, 0);
  Result mpi = shell("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun "
                     "--oversubscribe -np 2 " +
                     kiln_ + " " + train +
                     "--devices-per-process 4 --log-json mpi.jsonl --checkpoint-dir mpi");
  if (mpi.exit_code != 0 && mpi.err.find("built without MPI") != std::string::npos)
    GTEST_SKIP() << "kiln was built without MPI";
  ASSERT_EQ(mpi.exit_code, 0) << mpi.err;
  const std::vector<json> one = logLines("one.jsonl"), two = logLines("mpi.jsonl");
  ASSERT_EQ(two.size(), one.size());
  expectSameLog(one, two);
  expectSameTensors("one/step-000004.safetensors", "mpi/step-000004.safetensors");
}

} // namespace
} // namespace kiln
