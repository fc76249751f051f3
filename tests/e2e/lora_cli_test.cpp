// LoRA through the CLI on the tiny Qwen: `kiln run --training --lora` gives
// the adapter gradients of a float64 model and no base gradients; data and
// tensor-parallel LoRA training follows one device; checkpoints hold the
// adapters, beside a PEFT adapter folder, and resume bit for bit; `kiln
// merge` writes a sharded Hugging Face folder that runs like the adapted
// model; bad LoRA flags are clear errors.
#include <cmath>
#include <set>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/frontend/lora_adapter.h"
#include "formats/hf_checkpoint.h"
#include "formats/safetensors.h"
#include "tests/e2e/cli_fixture.h"
#include "tests/support/random.h"
#include "tests/support/reference_qwen.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using nlohmann::json;

frontend::LoraConfig loraOfRank(int64_t r) {
  frontend::LoraConfig lora;
  lora.rank = r;
  lora.alpha = 8;
  return lora;
}

class LoraCli : public Cli {
protected:
  void SetUp() override {
    Cli::SetUp();
    auto config = frontend::readDecoderConfig(kTiny);
    ASSERT_TRUE(config.isOk());
    config_ = *config;
    writeLearnableTokens("train.bin");
  }

  // Base weights in base.safetensors and an adapter folder with non-zero B.
  std::map<std::string, Tensor> writeBaseAndAdapter(const frontend::LoraConfig &lora) {
    std::map<std::string, Tensor> all = largeRandomQwenWeights(config_, lora);
    SafetensorsFile base;
    frontend::LoraAdapter adapter{lora, {}};
    for (const auto &[name, t] : all)
      (name.find(".lora_") != std::string::npos ? adapter.tensors : base.tensors)[name] = t;
    EXPECT_TRUE(writeSafetensors(path("base.safetensors"), base).isOk());
    EXPECT_TRUE(frontend::writeLoraAdapter(path("adapter"), adapter).isOk());
    return all;
  }

  std::vector<json> trainLog(const std::string &name, const std::string &flags) {
    Result r = run("train " + kTiny +
                   " --data train.bin --batch 8 --seq 16 --lr 1e-2 --steps 20 --lora-rank 4 " +
                   "--weights base.safetensors --log-json " + name + ".jsonl --checkpoint-dir " +
                   name + " --checkpoint-every 10 " + flags);
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
    return logLines(name + ".jsonl");
  }

  frontend::DecoderConfig config_;
};

TEST_F(LoraCli, RunTrainingGivesTheAdapterGradientsOfAFloat64Model) {
  const frontend::LoraConfig lora = loraOfRank(4);
  std::map<std::string, Tensor> weights = writeBaseAndAdapter(lora);
  const Tensor ids = randomIndices(TensorType{DType::I64, {2, 7}}, 9, config_.vocab_size);
  SafetensorsFile inputs;
  inputs.tensors["input_ids"] = ids;
  ASSERT_TRUE(writeSafetensors(path("inputs.safetensors"), inputs).isOk());
  Result r = run("run " + kTiny +
                 " --weights base.safetensors --inputs inputs.safetensors "
                 "--outputs out.safetensors --training --lora adapter");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto out = readSafetensors(path("out.safetensors"));
  ASSERT_TRUE(out.isOk()) << out.message();

  ReferenceQwen reference(config_, weights, lora);
  const double loss = reference.forward(ids).second;
  EXPECT_NEAR(out->tensors.at("loss").getFloat(0), loss, 1e-5 * loss);
  int adapters = 0;
  for (const auto &[name, t] : out->tensors) {
    if (name.rfind("grad.", 0) != 0 || name == "grad_norm")
      continue;
    const std::string param = name.substr(5);
    ASSERT_NE(param.find(".lora_"), std::string::npos) << "a base gradient: " << name;
    ++adapters;
    Tensor &w = weights.at(param);
    for (int64_t k = 0; k < 3; ++k) {
      const int64_t j = (k * 7919 + 29) % w.numElements();
      const double numeric = reference.centralDifference(ids, w, j);
      EXPECT_NEAR(t.getFloat(j), numeric, 1e-4 + 1e-3 * std::abs(numeric))
          << name << " element " << j;
    }
  }
  EXPECT_EQ(adapters, 2 * 5 * 2) << "A and B of five linears in two layers";
}

TEST_F(LoraCli, ParallelLoraTrainingFollowsOneDeviceAndResumesExactly) {
  json config = json::parse(slurp(kTiny));
  config["num_attention_heads"] = 8;
  config["kv_channels"] = 8;
  write("tiny8.json", config.dump());
  writeBaseAndAdapter(loraOfRank(4));
  const std::vector<json> one = trainLog("one", "--devices 1");
  ASSERT_EQ(one.size(), 20u);
  for (const auto &[name, flags] : std::vector<std::pair<std::string, std::string>>{
           {"dp8", "--devices 8"}, {"tp2dp4", "--devices 8 --tp 2 --zero 1"}}) {
    const std::vector<json> got = trainLog(name, flags);
    ASSERT_EQ(got.size(), 20u) << name;
    for (size_t i = 0; i < one.size(); ++i) {
      const double want = one[i]["loss"];
      EXPECT_NEAR(got[i]["loss"].get<double>(), want, 1e-5 * want) << name << " step " << i + 1;
    }
  }
  EXPECT_LT(one.back()["loss"].get<double>(), one.front()["loss"].get<double>())
      << "the adapters learn";

  // The checkpoint holds the adapters and their moments only; the PEFT
  // folder beside it holds the adapters under PEFT's names.
  auto ckpt = readSafetensors(path("one/step-000020.safetensors"));
  ASSERT_TRUE(ckpt.isOk()) << ckpt.message();
  for (const auto &[name, t] : ckpt->tensors)
    EXPECT_NE(name.find(".lora_"), std::string::npos) << "not an adapter: " << name;
  EXPECT_EQ(ckpt->tensors.size(), 3u * 20u) << "weights, m and v of 20 adapter tensors";
  auto peft = frontend::readLoraAdapter(path("one/step-000020-adapter"));
  ASSERT_TRUE(peft.isOk()) << peft.message();
  EXPECT_EQ(peft->config.rank, 4);
  EXPECT_EQ(peft->tensors.size(), 20u);
  EXPECT_TRUE(peft->tensors.count("base_model.model.transformer.h.0.attn.c_attn.lora_A.weight"));
  EXPECT_TRUE(peft->tensors.at("base_model.model.transformer.h.1.mlp.w2.lora_B.weight") ==
              ckpt->tensors.at("base_model.model.transformer.h.1.mlp.w2.lora_B.weight"));

  // Resumed from step 10 of the parallel run, it ends where it did.
  fs::create_directories(dir_ / "resumed");
  fs::copy_file(dir_ / "tp2dp4" / "step-000010.safetensors",
                dir_ / "resumed" / "step-000010.safetensors");
  Result resumed = run("train " + kTiny +
                       " --data train.bin --batch 8 --seq 16 --lr 1e-2 --steps 20 --lora-rank 4 "
                       "--weights base.safetensors --devices 8 --tp 2 --zero 1 "
                       "--checkpoint-dir resumed --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  expectSameTensors("tp2dp4/step-000020.safetensors", "resumed/step-000020.safetensors");

  // Another rank on the same checkpoints is refused.
  Result other = run("train " + kTiny +
                     " --data train.bin --batch 8 --seq 16 --steps 30 --lora-rank 8 "
                     "--weights base.safetensors --devices 1 --checkpoint-dir one --resume");
  expectRunError(other, {"other settings", "lora 'r 4"});
}

// The merged folder (three shards and an index) runs as the adapted model
// does, and a base sharded the same way gives the single file's loss.
TEST_F(LoraCli, MergeWritesAShardedFolderThatRunsLikeTheAdaptedModel) {
  writeBaseAndAdapter(loraOfRank(4));
  SafetensorsFile inputs;
  inputs.tensors["input_ids"] =
      randomIndices(TensorType{DType::I64, {2, 9}}, 4, config_.vocab_size);
  ASSERT_TRUE(writeSafetensors(path("inputs.safetensors"), inputs).isOk());
  auto lossOf = [&](const std::string &args) {
    Result r = run("run " + args + " --inputs inputs.safetensors --outputs o.safetensors");
    EXPECT_EQ(r.exit_code, 0) << args << ": " << r.err;
    auto out = readSafetensors(path("o.safetensors"));
    return out.isOk() ? out->tensors.at("loss").getFloat(0) : NAN;
  };
  const float adapted = lossOf(kTiny + " --weights base.safetensors --lora adapter");

  Result merged = run("merge " + kTiny +
                      " --weights base.safetensors --lora adapter -o merged --shard-size 100KB");
  ASSERT_EQ(merged.exit_code, 0) << merged.err;
  EXPECT_TRUE(fs::exists(dir_ / "merged" / "config.json"));
  // Shards as transformers names them, each named by the index.
  auto index = json::parse(slurp(dir_ / "merged" / kHfWeightsIndex));
  std::set<std::string> shards;
  for (const auto &[tensor, shard] : index["weight_map"].items())
    shards.insert(shard.get<std::string>());
  ASSERT_GE(shards.size(), 3u);
  for (const std::string &shard : shards)
    EXPECT_TRUE(fs::exists(dir_ / "merged" / shard)) << shard;
  EXPECT_TRUE(shards.count("model-00001-of-0000" + std::to_string(shards.size()) + ".safetensors"));
  EXPECT_NEAR(lossOf(path("merged") + " --weights merged"), adapted, 1e-5 * adapted);

  // The base alone, as one file and as shards given by index or folder.
  auto base = readSafetensors(path("base.safetensors"));
  ASSERT_TRUE(base.isOk());
  ASSERT_TRUE(writeHfWeights(path("sharded"), base->tensors, 100 * 1024).isOk());
  const float single = lossOf(kTiny + " --weights base.safetensors");
  EXPECT_EQ(lossOf(kTiny + " --weights sharded"), single);
  EXPECT_EQ(lossOf(kTiny + " --weights sharded/" + kHfWeightsIndex), single);
  const std::string second =
      json::parse(slurp(dir_ / "sharded" / kHfWeightsIndex))["weight_map"]["lm_head.weight"];
  fs::remove(dir_ / "sharded" / second);
  expectRunError(run("run " + kTiny +
                     " --weights sharded --inputs inputs.safetensors --outputs o.safetensors"),
                 {kHfWeightsIndex, second, "missing"});
}

// Dropout on the adapters' input: a run is repeatable, resumes bit for bit
// (the masks follow the seed and the step), trains otherwise than without
// dropout, and its PEFT folder records the probability.
TEST_F(LoraCli, DropoutIsRepeatableAndResumesExactly) {
  writeBaseAndAdapter(loraOfRank(4));
  const std::string flags = "--devices 2 --lora-dropout 0.1";
  const std::vector<json> a = trainLog("a", flags), b = trainLog("b", flags);
  const std::vector<json> none = trainLog("none", "--devices 2");
  ASSERT_EQ(a.size(), 20u);
  ASSERT_EQ(b.size(), 20u);
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i]["loss"], b[i]["loss"]) << "step " << i + 1;
  EXPECT_NE(a.back()["loss"], none.back()["loss"]);
  fs::create_directories(dir_ / "c");
  fs::copy_file(dir_ / "a" / "step-000010.safetensors", dir_ / "c" / "step-000010.safetensors");
  Result resumed = run("train " + kTiny +
                       " --data train.bin --batch 8 --seq 16 --lr 1e-2 --steps 20 --lora-rank 4 "
                       "--weights base.safetensors --checkpoint-dir c --resume " +
                       flags);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  expectSameTensors("a/step-000020.safetensors", "c/step-000020.safetensors");
  auto peft = frontend::readLoraAdapter(path("a/step-000020-adapter"));
  ASSERT_TRUE(peft.isOk()) << peft.message();
  EXPECT_EQ(peft->config.dropout, 0.1);
}

// Two MPI processes of four devices, ZeRO-1 and dropout: the checkpoint of
// one process of eight, bit for bit, and one PEFT folder beside it.
TEST_F(LoraCli, TwoMpiProcessesTrainTheAdaptersAsOne) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "OpenMPI's mpirun is not installed";
  writeBaseAndAdapter(loraOfRank(4));
  const std::string flags = "--devices 8 --zero 1 --lora-dropout 0.1 ";
  trainLog("one", flags);
  Result mpi = shell("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun "
                     "--oversubscribe -np 2 " +
                     kiln_ + " train " + kTiny +
                     " --data train.bin --batch 8 --seq 16 --lr 1e-2 --steps 20 --lora-rank 4 "
                     "--weights base.safetensors --checkpoint-dir two --devices-per-process 4 " +
                     flags);
  if (mpi.exit_code != 0 && mpi.err.find("built without MPI") != std::string::npos)
    GTEST_SKIP() << "kiln was built without MPI";
  ASSERT_EQ(mpi.exit_code, 0) << mpi.err;
  expectSameTensors("one/step-000020.safetensors", "two/step-000020.safetensors");
  EXPECT_TRUE(fs::exists(dir_ / "two" / "step-000020-adapter" / frontend::kAdapterWeightsFile));
}

// The corpus a LoRA run fine-tunes to in the main job: another rule of the
// same kind, each token the one before times MUL plus ADD plus noise 0-3.
TEST_F(LoraCli, MakeInputsWritesATokenFileOfTheRuleGiven) {
  for (const auto &[rule, mul, add] :
       std::vector<std::tuple<std::string, int, int>>{{"", 5, 3}, {"--token-rule 7,1", 7, 1}}) {
    ASSERT_EQ(run("make-inputs " + kTiny + " --tokens 1000 -o t.bin " + rule).exit_code, 0);
    const std::string bytes = slurp(path("t.bin"));
    ASSERT_EQ(bytes.size(), 2000u);
    const auto *t = reinterpret_cast<const uint16_t *>(bytes.data());
    for (size_t i = 1; i < 1000; ++i) {
      const int step = (t[i] - (t[i - 1] * mul + add) % 512 + 512) % 512;
      ASSERT_LE(step, 3) << rule << " token " << i;
    }
  }
  expectUsageError(run("make-inputs " + kTiny + " --tokens 10 --token-rule 7 -o t.bin"),
                   {"--token-rule"});
}

TEST_F(LoraCli, BadLoraFlagsAreClearErrors) {
  writeBaseAndAdapter(loraOfRank(4));
  const std::string train =
      "train " + kTiny + " --data train.bin --batch 8 --seq 16 --steps 1 --devices 1 ";
  expectUsageError(run(train + "--lora-rank 4 --lora adapter"), {"--lora adapter", "give one"});
  expectRunError(run(train + "--lora-rank 4 --lora-targets c_attn,c_atn"),
                 {"'c_atn' matches no linear layer"});
  expectUsageError(run(train + "--lora-rank 4 --lora-dropout 1"), {"LoRA dropout 1", "[0, 1)"});
  expectRunError(run(train + "--lora missing-folder"), {"missing-folder", "adapter_config.json"});
  expectRunError(run("merge " + kTiny + " --weights base.safetensors --lora adapter -o " + kSource +
                     "/examples/qwen-tiny"),
                 {"base model's folder"});
}

} // namespace
} // namespace kiln
