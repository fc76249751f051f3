// The decoder families through the CLI: `kiln run --training` on the
// compiled kernels gives the loss and gradients of a float64 model for
// Qwen2 (grouped-query attention), Llama 3.1 (biases, rope scaling) and
// Qwen3 (head_dim, q/k norms, tied embeddings); a GQA model trains under
// tensor and pipeline parallelism, ZeRO-3 and recomputation as on one
// device; LoRA writes PEFT's names for the family and merges back; the
// published configs compile for the 910B.
#include <cmath>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/frontend/decoder_model.h"
#include "compiler/frontend/lora_adapter.h"
#include "formats/safetensors.h"
#include "tests/e2e/cli_fixture.h"
#include "tests/support/random.h"
#include "tests/support/reference_decoder.h"
#include "tests/support/reference_qwen.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using nlohmann::json;

std::string example(const std::string &name) { return kSource + "/examples/" + name; }

class FamiliesCli : public Cli {
protected:
  frontend::DecoderConfig load(const std::string &name) {
    auto config = frontend::readDecoderConfig(example(name) + "/config.json");
    EXPECT_TRUE(config.isOk()) << config.message();
    return config.isOk() ? *config : frontend::DecoderConfig{};
  }

  // Losses of 8 training steps of `model` with `flags`.
  std::vector<double> losses(const std::string &model, const std::string &name,
                             const std::string &flags) {
    return trainLosses(model + " --data train.bin --batch 4 --seq 16 --lr 1e-2 --steps 8 " + flags,
                       name + ".jsonl");
  }
};

TEST_F(FamiliesCli, RunTrainingOnCompiledKernelsMatchesAFloat64Model) {
  for (const std::string name : {"qwen2-tiny", "llama-tiny", "qwen3-tiny"}) {
    SCOPED_TRACE(name);
    const frontend::DecoderConfig config = load(name);
    std::map<std::string, Tensor> weights = largeRandomQwenWeights(config);
    SafetensorsFile w;
    w.tensors = weights;
    ASSERT_TRUE(writeSafetensors(path("w.safetensors"), w).isOk());
    const Tensor ids = randomIndices(TensorType{DType::I64, {2, 9}}, 3, config.vocab_size);
    SafetensorsFile inputs;
    inputs.tensors["input_ids"] = ids;
    ASSERT_TRUE(writeSafetensors(path("in.safetensors"), inputs).isOk());
    Result r = run("run " + example(name) +
                   " --weights w.safetensors --inputs in.safetensors --outputs out.safetensors "
                   "--training");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto out = readSafetensors(path("out.safetensors"));
    ASSERT_TRUE(out.isOk()) << out.message();

    ReferenceDecoder reference(config, weights);
    const double loss = reference.forward(ids).second;
    EXPECT_NEAR(out->tensors.at("loss").getFloat(0), loss, 1e-5 * loss);
    int gradients = 0;
    for (const auto &[tensor, t] : out->tensors) {
      if (tensor.rfind("grad.", 0) != 0)
        continue;
      ++gradients;
      Tensor &param = weights.at(tensor.substr(5));
      for (int64_t k = 0; k < 2; ++k) {
        const int64_t j = (k * 7919 + 29) % param.numElements();
        const double numeric = reference.centralDifference(ids, param, j);
        EXPECT_NEAR(t.getFloat(j), numeric, 1e-4 + 1e-3 * std::abs(numeric))
            << tensor << " element " << j;
      }
    }
    EXPECT_EQ(gradients, static_cast<int>(weights.size()));
  }
}

TEST_F(FamiliesCli, GroupedQueryAttentionTrainsInEveryLayoutAsOnOneDevice) {
  writeLearnableTokens("train.bin");
  // Qwen2: 4 query heads sharing 2 key/value heads; Qwen3 adds q/k norms
  // whose per-rank gradients tensor parallelism must sum.
  for (const std::string name : {"qwen2-tiny", "qwen3-tiny"}) {
    const std::string model = example(name);
    const std::vector<double> one = losses(model, name + "-one", "--devices 1");
    ASSERT_EQ(one.size(), 8u);
    std::vector<std::pair<std::string, std::string>> layouts = {
        {"tp2", "--devices 2 --tp 2"},
        {"tp2-zero3", "--devices 4 --tp 2 --zero 3"},
        {"recompute", "--devices 2 --recompute full"}};
    // Qwen3's tied embedding is read by the first and the last stage.
    layouts.push_back({"pp2", "--devices 2 --pp 2 --micro-batches 2"});
    layouts.push_back({"pp2-tp2", "--devices 4 --pp 2 --tp 2 --micro-batches 2 --zero 1"});
    for (const auto &[layout, flags] : layouts) {
      const std::vector<double> got = losses(model, name + "-" + layout, flags);
      ASSERT_EQ(got.size(), one.size()) << name << " " << layout;
      for (size_t i = 0; i < one.size(); ++i)
        EXPECT_NEAR(got[i], one[i], 1e-5 * one[i]) << name << " " << layout << " step " << i + 1;
    }
  }
}

// Qwen3 (grouped-query attention, q/k norms, a tied embedding) across MPI
// processes equals one process bit for bit, and resuming is bit-exact.
TEST_F(FamiliesCli, MpiEqualsOneProcessAndResumeIsExact) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "OpenMPI's mpirun is not installed";
  writeLearnableTokens("train.bin");
  const std::string mpirun = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun "
                             "--oversubscribe -np 2 " +
                             kiln_ + " ";
  const std::string train = "train " + example("qwen3-tiny") +
                            " --data train.bin --batch 4 --seq 16 --lr 1e-2 --steps 4 "
                            "--checkpoint-every 2 --devices 4 --tp 2 --pp 2 --micro-batches 2 ";
  ASSERT_EQ(run(train + "--log-json one.jsonl --checkpoint-dir one").exit_code, 0);
  Result mpi =
      shell(mpirun + train + "--devices-per-process 2 --log-json mpi.jsonl --checkpoint-dir mpi");
  if (mpi.exit_code != 0 && mpi.err.find("built without MPI") != std::string::npos)
    GTEST_SKIP() << "kiln was built without MPI";
  ASSERT_EQ(mpi.exit_code, 0) << mpi.err;
  const std::vector<json> one = logLines("one.jsonl"), two = logLines("mpi.jsonl");
  ASSERT_EQ(two.size(), one.size());
  for (size_t i = 0; i < one.size(); ++i)
    EXPECT_EQ(two[i]["loss"], one[i]["loss"]) << "step " << i + 1;
  expectSameTensors("one/step-000004.safetensors", "mpi/step-000004.safetensors");

  fs::create_directories(dir_ / "resumed");
  fs::copy_file(dir_ / "one" / "step-000002.safetensors",
                dir_ / "resumed" / "step-000002.safetensors");
  Result resumed = run(train + "--checkpoint-dir resumed --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  expectSameTensors("one/step-000004.safetensors", "resumed/step-000004.safetensors");
}

TEST_F(FamiliesCli, LoraOnQwen2WritesPeftNamesAndMergesBack) {
  writeLearnableTokens("train.bin");
  Result r = run("train " + example("qwen2-tiny") +
                 " --data train.bin --batch 4 --seq 16 --lr 1e-2 --steps 4 --devices 2 "
                 "--lora-rank 4 --lora-targets q_proj,v_proj --checkpoint-dir ckpt "
                 "--checkpoint-every 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto adapter = frontend::readLoraAdapter(path("ckpt/step-000004-adapter"));
  ASSERT_TRUE(adapter.isOk()) << adapter.message();
  EXPECT_EQ(adapter->config.targets, (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_EQ(adapter->tensors.size(), 2u * 2u * 2u);
  EXPECT_TRUE(
      adapter->tensors.count("base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight"));
  const json config = json::parse(slurp(path("ckpt/step-000004-adapter/adapter_config.json")));
  EXPECT_EQ(config["target_modules"], json::array({"q_proj", "v_proj"}));
  EXPECT_EQ(config["peft_type"], "LORA");

  // The base the run started from, merged with the adapter.
  ASSERT_EQ(run("init " + example("qwen2-tiny") + " -o base.safetensors").exit_code, 0);
  r = run("merge " + example("qwen2-tiny") +
          " --weights base.safetensors --lora ckpt/step-000004-adapter -o merged");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto merged = readSafetensors(path("merged/model.safetensors"));
  ASSERT_TRUE(merged.isOk()) << merged.message();
  auto base = readSafetensors(path("base.safetensors"));
  ASSERT_TRUE(base.isOk());
  EXPECT_FALSE(merged->tensors.at("model.layers.1.self_attn.v_proj.weight") ==
               base->tensors.at("model.layers.1.self_attn.v_proj.weight"))
      << "the adapter moved v_proj";
  EXPECT_TRUE(merged->tensors.at("model.layers.1.self_attn.k_proj.weight") ==
              base->tensors.at("model.layers.1.self_attn.k_proj.weight"))
      << "k_proj has no adapter";
}

TEST_F(FamiliesCli, AnotherFamilysCheckpointIsAClearError) {
  writeLearnableTokens("train.bin");
  ASSERT_EQ(run("init " + kTiny + " -o qwen1.safetensors").exit_code, 0);
  ASSERT_EQ(
      run("make-inputs " + example("qwen2-tiny") + " --batch 1 --seq 8 -o i.safetensors").exit_code,
      0);
  const std::vector<std::string> fragments = {
      "qwen1.safetensors", "a checkpoint of QWenLMHeadModel", "'transformer.wte.weight'",
      "the model is Qwen2ForCausalLM", "'model.embed_tokens.weight'"};
  for (const std::string &command :
       {"run " + example("qwen2-tiny") +
            " --weights qwen1.safetensors --inputs i.safetensors --outputs o.safetensors",
        "train " + example("qwen2-tiny") +
            " --weights qwen1.safetensors --data train.bin --steps 1 --batch 2 --seq 8 "
            "--devices 1"}) {
    Result r = run(command);
    EXPECT_EQ(r.exit_code, 1) << command;
    for (const std::string &f : fragments)
      EXPECT_NE(r.err.find(f), std::string::npos)
          << command << ": missing '" << f << "' in " << r.err;
  }
}

TEST_F(FamiliesCli, AttentionFp32CastPassFindsEveryLayerOfEveryFamily) {
  for (const std::string name : {"qwen2-tiny", "llama-tiny", "qwen3-tiny"}) {
    // The attention unfused (FlashAttentionFusionPass, on by default on
    // ascend910b, would leave the cast pass nothing to do).
    Result r = run("compile " + example(name) +
                   " --training --dtype f16 --precision-mode allow_mix_precision "
                   "--disable-pass FlashAttentionFusionPass");
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.err;
    const std::string all = r.out + r.err;
    EXPECT_NE(all.find("AttentionFp32CastPass: match_times 2, effect_times 2"), std::string::npos)
        << name << ":\n"
        << all;
    EXPECT_NE(all.find("RmsNormFusionPass"), std::string::npos) << name;
    EXPECT_NE(all.find("TbeMatmulFixPipeFusionPass"), std::string::npos) << name;
  }
}

TEST_F(FamiliesCli, PublishedConfigsCompileForThe910B) {
  for (const std::string name : {"qwen2.5-14b", "llama-3.1-8b"})
    for (const std::string dtype : {"f16", "bf16"}) {
      Result r =
          run("compile " + example(name) + " --target ascend910b --seq 256 --dtype " + dtype);
      EXPECT_EQ(r.exit_code, 0) << name << " " << dtype << ": " << r.err;
      EXPECT_NE((r.out + r.err).find("kernels:"), std::string::npos) << name;
    }
  Result stats = run("graph " + example("qwen2.5-14b") + " --seq 16 --format stats");
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_EQ(json::parse(stats.out)["parameter_count"], 14'770'033'664);
}

} // namespace
} // namespace kiln
