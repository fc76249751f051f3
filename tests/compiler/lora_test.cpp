// LoRA in the Qwen graph: PEFT's target matching and names, the adapters'
// shapes and tensor-parallel splits, the forward and the adapter gradients
// against a plain-loop float64 model, the adapter folder and the merge.
#include <cmath>
#include <filesystem>
#include <unistd.h>

#include <gtest/gtest.h>

#include "compiler/autodiff/training_step.h"
#include "compiler/frontend/decoder_init.h"
#include "compiler/frontend/decoder_model.h"
#include "compiler/frontend/lora_adapter.h"
#include "ops/interpreter.h"
#include "tests/support/random.h"
#include "tests/support/reference_math.h"
#include "tests/support/reference_qwen.h"

namespace kiln::frontend {
namespace {

DecoderConfig tinyConfig() {
  auto config = readDecoderConfig(std::string(KILN_SOURCE_DIR) + "/examples/qwen-tiny/config.json");
  EXPECT_TRUE(config.isOk()) << config.message();
  return config.isOk() ? *config : DecoderConfig{};
}

LoraConfig rank(int64_t r, std::vector<std::string> targets = {"c_attn", "c_proj", "w1", "w2"}) {
  LoraConfig lora;
  lora.rank = r;
  lora.alpha = 16;
  lora.targets = std::move(targets);
  return lora;
}

TEST(LoraConfigTest, TargetsMatchByDottedSuffixAsPeftDoes) {
  LoraConfig lora = rank(8, {"c_proj"});
  EXPECT_TRUE(isLoraTarget(lora, "transformer.h.0.attn.c_proj"));
  EXPECT_TRUE(isLoraTarget(lora, "transformer.h.0.mlp.c_proj"));
  EXPECT_FALSE(isLoraTarget(lora, "transformer.h.0.attn.c_attn"));
  lora.targets = {"mlp.c_proj"};
  EXPECT_FALSE(isLoraTarget(lora, "transformer.h.0.attn.c_proj"));
  EXPECT_TRUE(isLoraTarget(lora, "transformer.h.3.mlp.c_proj"));
  lora.targets = {"proj"}; // a suffix of the name, not of a dotted part
  EXPECT_FALSE(isLoraTarget(lora, "transformer.h.0.mlp.c_proj"));
  EXPECT_EQ(loraAName("transformer.h.0.attn.c_attn"),
            "base_model.model.transformer.h.0.attn.c_attn.lora_A.weight");
  EXPECT_EQ(loraBName("transformer.h.0.attn.c_attn"),
            "base_model.model.transformer.h.0.attn.c_attn.lora_B.weight");
}

TEST(LoraConfigTest, AdapterConfigRoundTripsAndRefusesWhatKilnCannotApply) {
  LoraConfig lora = rank(64);
  lora.dropout = 0.05;
  lora.base_model = "Qwen/Qwen-14B";
  nlohmann::json doc = adapterConfigJson(lora);
  EXPECT_EQ(doc["peft_type"], "LORA");
  EXPECT_EQ(doc["task_type"], "CAUSAL_LM");
  EXPECT_EQ(doc["bias"], "none");
  auto back = parseAdapterConfig(doc, "adapter_config.json");
  ASSERT_TRUE(back.isOk()) << back.message();
  EXPECT_EQ(back->toString(), lora.toString());
  EXPECT_EQ(back->base_model, "Qwen/Qwen-14B");

  auto refused = [&](nlohmann::json bad, const std::string &fragment) {
    auto r = parseAdapterConfig(bad, "adapter_config.json");
    ASSERT_FALSE(r.isOk()) << bad.dump();
    EXPECT_NE(r.message().find("adapter_config.json"), std::string::npos) << r.message();
    EXPECT_NE(r.message().find(fragment), std::string::npos) << r.message();
  };
  nlohmann::json bad = doc;
  bad["target_modules"] = ".*attn.*";
  refused(bad, "regular expression");
  bad = doc;
  bad["bias"] = "all";
  refused(bad, "bias");
  bad = doc;
  bad["peft_type"] = "IA3";
  refused(bad, "LORA");
  bad = doc;
  bad["r"] = 0;
  refused(bad, "rank 0");
  bad = doc;
  bad["lora_dropout"] = 1.5;
  refused(bad, "dropout");
}

TEST(LoraParametersTest, ShapesAndSplitsFollowTheBaseWeights) {
  DecoderConfig config = tinyConfig();
  auto params = loraParameters(config, rank(4));
  ASSERT_TRUE(params.isOk()) << params.message();
  // Five linears per layer, A and B of each.
  ASSERT_EQ(params->size(), static_cast<size_t>(config.num_hidden_layers * 5 * 2));
  const int64_t H = config.hidden_size, F = config.mlpWidth();
  std::map<std::string, ParamSpec> by_name;
  for (const ParamSpec &p : *params)
    by_name[p.name] = p;
  auto expect = [&](const std::string &module, Shape a, TensorSplit a_split, Shape b,
                    TensorSplit b_split) {
    const ParamSpec &pa = by_name.at(loraAName(module)), &pb = by_name.at(loraBName(module));
    EXPECT_EQ(pa.shape, a) << module;
    EXPECT_EQ(pa.split, a_split) << module;
    EXPECT_EQ(pb.shape, b) << module;
    EXPECT_EQ(pb.split, b_split) << module;
  };
  const TensorSplit replicated, rows{0}, columns{1}, qkv_rows{0, 3};
  // Column-parallel: B split as the weight's rows; row-parallel: A by columns.
  expect("transformer.h.1.attn.c_attn", {4, H}, replicated, {3 * H, 4}, qkv_rows);
  expect("transformer.h.1.attn.c_proj", {4, H}, columns, {H, 4}, replicated);
  expect("transformer.h.1.mlp.w1", {4, H}, replicated, {F, 4}, rows);
  expect("transformer.h.1.mlp.c_proj", {4, F}, columns, {H, 4}, replicated);

  for (const char *target : {"c_atn", "lm_head"}) {
    auto bad = loraParameters(config, rank(4, {"c_attn", target}));
    ASSERT_FALSE(bad.isOk()) << target;
    EXPECT_NE(bad.message().find(std::string("'") + target + "' matches no linear layer"),
              std::string::npos)
        << bad.message();
  }
}

TEST(LoraGraphTest, BaseIsFrozenAndAdaptersAreF32Parameters) {
  ModelOptions options{2, 8, DType::F16};
  options.lora = rank(4, {"c_attn"});
  auto graph = buildDecoderForward(tinyConfig(), options);
  ASSERT_TRUE(graph.isOk()) << graph.message();
  int adapters = 0;
  for (const GraphInput &in : graph->inputs()) {
    if (in.name.find("lora_") != std::string::npos) {
      ++adapters;
      EXPECT_EQ(in.role, InputRole::Parameter) << in.name;
      EXPECT_EQ(graph->type(in.value).dtype, DType::F32) << in.name;
    } else if (in.name != "input_ids" && in.name != "labels") {
      EXPECT_EQ(in.role, InputRole::Frozen) << in.name;
      EXPECT_EQ(graph->type(in.value).dtype, DType::F16) << in.name;
    }
  }
  EXPECT_EQ(adapters, 4); // c_attn of two layers
}

// The forward with adapters equals the float64 model's; every adapter
// gradient equals the float64 model's central difference, and the base
// gets none.
TEST(LoraGraphTest, ForwardAndAdapterGradientsMatchAFloat64Model) {
  DecoderConfig config = tinyConfig();
  const LoraConfig lora = rank(4);
  std::map<std::string, Tensor> weights = testing::largeRandomQwenWeights(config, lora);
  const Tensor ids = testing::randomIndices(TensorType{DType::I64, {2, 7}}, 5, config.vocab_size);
  ModelOptions options{2, 7, DType::F32};
  options.lora = lora;
  auto forward = buildDecoderForward(config, options);
  ASSERT_TRUE(forward.isOk()) << forward.message();
  autodiff::TrainingStepOptions step;
  step.optimizer = false;
  step.output_gradients = true;
  auto train = autodiff::buildTrainingStep(*forward, step);
  ASSERT_TRUE(train.isOk()) << train.message();
  auto out = ops::interpret(*train, testing::modelFeed(*train, weights, ids));
  ASSERT_TRUE(out.isOk()) << out.message();

  testing::ReferenceQwen reference(config, weights, lora);
  const double loss = reference.forward(ids).second;
  EXPECT_NEAR(out->at("loss").getFloat(0), loss, 1e-5 * loss);

  int checked = 0;
  for (const GraphInput &in : train->inputs()) {
    if (in.role == InputRole::Frozen) {
      EXPECT_FALSE(out->count(autodiff::gradientName(in.name))) << in.name;
    }
    if (in.role != InputRole::Parameter)
      continue;
    const Tensor &grad = out->at(autodiff::gradientName(in.name));
    Tensor &w = weights.at(in.name);
    for (int64_t k = 0; k < 4; ++k) {
      const int64_t j = (k * 7919 + 13) % w.numElements();
      const double numeric = reference.centralDifference(ids, w, j);
      EXPECT_NEAR(grad.getFloat(j), numeric, 1e-4 + 1e-3 * std::abs(numeric))
          << in.name << " element " << j;
      checked += std::abs(numeric) > 1e-4;
    }
  }
  EXPECT_GT(checked, 60) << "B is non-zero, so A's gradients are too";
}

class LoraAdapterTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kiln-lora-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(LoraAdapterTest, FolderRoundTripsAndIsCheckedAgainstTheModel) {
  DecoderConfig config = tinyConfig();
  auto fresh = startingAdapter(config, "", rank(4, {"w1", "w2"}), 3);
  ASSERT_TRUE(fresh.isOk()) << fresh.message();
  ASSERT_EQ(fresh->tensors.size(), 8u);
  for (const auto &[name, t] : fresh->tensors)
    if (name.find("lora_B") != std::string::npos) {
      EXPECT_EQ(t.toFloats(), std::vector<float>(t.numElements(), 0.0f)) << name;
    }
  ASSERT_TRUE(writeLoraAdapter(dir_.string(), *fresh).isOk());
  EXPECT_TRUE(std::filesystem::exists(dir_ / kAdapterConfigFile));
  auto back = startingAdapter(config, dir_.string(), {}, 0);
  ASSERT_TRUE(back.isOk()) << back.message();
  EXPECT_EQ(back->config.toString(), fresh->config.toString());
  for (const auto &[name, t] : fresh->tensors)
    EXPECT_TRUE(back->tensors.at(name) == t) << name;

  LoraAdapter missing = *fresh;
  missing.tensors.erase(missing.tensors.begin());
  Status s = checkLoraAdapter(config, missing, "a.safetensors");
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("a.safetensors: no tensor"), std::string::npos) << s.message();
  LoraAdapter extra = *fresh;
  extra.tensors["base_model.model.lm_head.lora_A.weight"] = fresh->tensors.begin()->second;
  s = checkLoraAdapter(config, extra, "a.safetensors");
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("is not the A or B"), std::string::npos) << s.message();
  LoraAdapter wrong = *fresh;
  wrong.config.rank = 8;
  s = checkLoraAdapter(config, wrong, "a.safetensors");
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("rank 8 need"), std::string::npos) << s.message();
}

// The merge is W + (alpha / r) B A, element by element, in W's dtype; the
// merged model without adapters gives the adapted model's loss.
TEST_F(LoraAdapterTest, MergeIsTheBasePlusScaledProduct) {
  DecoderConfig config = tinyConfig();
  const LoraConfig lora = rank(4, {"c_attn", "mlp.c_proj"});
  std::map<std::string, Tensor> weights = testing::largeRandomQwenWeights(config, lora);
  LoraAdapter adapter{lora, {}};
  std::map<std::string, Tensor> base;
  for (const auto &[name, t] : weights)
    (name.find("lora_") != std::string::npos ? adapter.tensors : base)[name] = t;
  base["transformer.h.0.attn.c_attn.weight"] =
      base["transformer.h.0.attn.c_attn.weight"].castTo(DType::BF16);
  auto merged = mergeLoraAdapter(config, base, adapter, "w.safetensors");
  ASSERT_TRUE(merged.isOk()) << merged.message();
  ASSERT_EQ(merged->size(), base.size());
  for (const char *module : {"transformer.h.0.attn.c_attn", "transformer.h.1.mlp.c_proj"}) {
    const Tensor &w = base.at(std::string(module) + ".weight");
    const Tensor &m = merged->at(std::string(module) + ".weight");
    const Tensor &a = adapter.tensors.at(loraAName(module));
    const Tensor &b = adapter.tensors.at(loraBName(module));
    ASSERT_EQ(m.type(), w.type()) << module;
    const int64_t in = a.shape()[1];
    for (int64_t o = 0; o < w.shape()[0]; ++o)
      for (int64_t i = 0; i < in; ++i) {
        double delta = 0;
        for (int64_t k = 0; k < 4; ++k)
          delta += static_cast<double>(b.getFloat(o * 4 + k)) * a.getFloat(k * in + i);
        Tensor want(TensorType{w.dtype(), {}});
        want.setFloat(0, static_cast<float>(w.getFloat(o * in + i) + lora.scale() * delta),
                      OverflowMode::InfNan);
        ASSERT_EQ(m.getFloat(o * in + i), want.getFloat(0))
            << module << " [" << o << "," << i << "]";
      }
  }
  EXPECT_TRUE(merged->at("transformer.h.0.mlp.w1.weight") ==
              base.at("transformer.h.0.mlp.w1.weight"));

  // The merged f32 model reproduces the adapted one.
  std::map<std::string, Tensor> f32_base = base, f32_merged;
  f32_base["transformer.h.0.attn.c_attn.weight"] = weights["transformer.h.0.attn.c_attn.weight"];
  auto exact = mergeLoraAdapter(config, f32_base, adapter, "w.safetensors");
  ASSERT_TRUE(exact.isOk());
  const Tensor ids = testing::randomIndices(TensorType{DType::I64, {1, 9}}, 2, config.vocab_size);
  const double adapted = testing::ReferenceQwen(config, weights, lora).forward(ids).second;
  const double folded = testing::ReferenceQwen(config, *exact).forward(ids).second;
  EXPECT_NEAR(folded, adapted, 1e-5 * adapted);
}

} // namespace
} // namespace kiln::frontend
