// The decoder families beside Qwen v1 (Qwen2, Llama 3.x, Qwen3): the
// published configs parse with their published parameter counts, the tiny
// ones build graphs whose logits, loss and every gradient equal a float64
// transcription of the Hugging Face modeling files, and what kiln does not
// implement is a clear error naming the field.
#include <cmath>
#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/autodiff/autodiff.h"
#include "compiler/autodiff/training_step.h"
#include "compiler/frontend/decoder_model.h"
#include "ops/interpreter.h"
#include "tests/support/random.h"
#include "tests/support/reference_decoder.h"
#include "tests/support/reference_math.h"
#include "tests/support/reference_qwen.h"

namespace kiln::frontend {
namespace {

using nlohmann::json;

std::string example(const std::string &name) {
  return std::string(KILN_SOURCE_DIR) + "/examples/" + name + "/config.json";
}

DecoderConfig load(const std::string &name) {
  auto config = readDecoderConfig(example(name));
  EXPECT_TRUE(config.isOk()) << config.message();
  return config.isOk() ? *config : DecoderConfig{};
}

int64_t parameterCount(const DecoderConfig &config) {
  int64_t n = 0;
  for (const ParamSpec &p : decoderParameters(config))
    n += numElements(p.shape);
  return n;
}

TEST(DecoderFamilyTest, PublishedConfigsHaveTheirPublishedParameterCounts) {
  // The model cards' counts: 14.7B, 8.2B and 8.0B, exactly.
  EXPECT_EQ(parameterCount(load("qwen2.5-14b")), 14'770'033'664);
  EXPECT_EQ(parameterCount(load("qwen3-8b")), 8'190'735'360);
  EXPECT_EQ(parameterCount(load("llama-3.1-8b")), 8'030'261'248);
  const DecoderConfig qwen25 = load("qwen2.5-14b");
  EXPECT_EQ(qwen25.family->architecture, "Qwen2ForCausalLM");
  EXPECT_EQ(qwen25.kvHeads(), 8);
  EXPECT_EQ(qwen25.groupSize(), 5);
  EXPECT_EQ(qwen25.seq_length, 4096) << "max_position_embeddings, at most 4096";
  const DecoderConfig llama = load("llama-3.1-8b");
  EXPECT_TRUE(llama.rope_scaling.enabled());
  EXPECT_EQ(llama.rope_scaling.original_max_position_embeddings, 8192);
}

TEST(DecoderFamilyTest, HuggingFaceNamesAndBiasesPerFamily) {
  auto names = [](const DecoderConfig &c) {
    std::set<std::string> out;
    for (const ParamSpec &p : decoderParameters(c))
      out.insert(p.name);
    return out;
  };
  const auto qwen2 = names(load("qwen2-tiny"));
  EXPECT_TRUE(qwen2.count("model.embed_tokens.weight"));
  EXPECT_TRUE(qwen2.count("model.layers.1.self_attn.k_proj.bias"));
  EXPECT_FALSE(qwen2.count("model.layers.1.self_attn.o_proj.bias"));
  EXPECT_FALSE(qwen2.count("model.layers.1.mlp.up_proj.bias"));
  EXPECT_TRUE(qwen2.count("lm_head.weight"));
  const auto llama = names(load("llama-tiny")); // attention_bias and mlp_bias true
  EXPECT_TRUE(llama.count("model.layers.0.self_attn.o_proj.bias"));
  EXPECT_TRUE(llama.count("model.layers.0.mlp.down_proj.bias"));
  const auto qwen3 = names(load("qwen3-tiny")); // tied, head_dim 24 != 64 / 4
  EXPECT_TRUE(qwen3.count("model.layers.0.self_attn.q_norm.weight"));
  EXPECT_FALSE(qwen3.count("model.layers.0.self_attn.q_proj.bias"));
  EXPECT_FALSE(qwen3.count("lm_head.weight"));
  std::map<std::string, Shape> shapes;
  for (const ParamSpec &p : decoderParameters(load("qwen3-tiny")))
    shapes[p.name] = p.shape;
  EXPECT_EQ(shapes.at("model.layers.0.self_attn.q_proj.weight"), (Shape{4 * 24, 64}));
  EXPECT_EQ(shapes.at("model.layers.0.self_attn.k_proj.weight"), (Shape{2 * 24, 64}));
  EXPECT_EQ(shapes.at("model.layers.0.self_attn.q_norm.weight"), (Shape{24}));
}

struct Family {
  const char *name;
  const char *example;
  bool tie; // overrides the example's tie_word_embeddings
};

class FamilyReferenceTest : public ::testing::TestWithParam<Family> {};

// Logits, loss and sampled elements of every gradient of the training step
// (reference interpreter) against the float64 model and its central
// differences.
TEST_P(FamilyReferenceTest, LossAndEveryGradientMatchAFloat64Model) {
  DecoderConfig config = load(GetParam().example);
  config.tie_word_embeddings = GetParam().tie;
  std::map<std::string, Tensor> weights = testing::largeRandomQwenWeights(config);
  const Tensor ids = testing::randomIndices(TensorType{DType::I64, {2, 7}}, 5, config.vocab_size);
  auto forward = buildDecoderForward(config, ModelOptions{2, 7, DType::F32});
  ASSERT_TRUE(forward.isOk()) << forward.message();
  autodiff::TrainingStepOptions step;
  step.optimizer = false;
  step.output_gradients = true;
  auto train = autodiff::buildTrainingStep(*forward, step);
  ASSERT_TRUE(train.isOk()) << train.message();
  auto out = ops::interpret(*train, testing::modelFeed(*train, weights, ids));
  ASSERT_TRUE(out.isOk()) << out.message();

  auto forward_out = ops::interpret(*forward, testing::modelFeed(*forward, weights, ids));
  ASSERT_TRUE(forward_out.isOk()) << forward_out.message();

  testing::ReferenceDecoder reference(config, weights);
  auto [logits, loss] = reference.forward(ids);
  EXPECT_NEAR(out->at("loss").getFloat(0), loss, 1e-5 * loss);
  const Tensor &got = forward_out->at("logits");
  ASSERT_EQ(got.numElements(), static_cast<int64_t>(logits.size()));
  double max_err = 0, max_abs = 0;
  for (size_t k = 0; k < logits.size(); ++k) {
    max_err = std::max(max_err, std::abs(got.getFloat(static_cast<int64_t>(k)) - logits[k]));
    max_abs = std::max(max_abs, std::abs(logits[k]));
  }
  EXPECT_GT(max_abs, 0.5) << "the comparison is not between near-zero numbers";
  EXPECT_LT(max_err, 1e-4 * max_abs);

  int parameters = 0;
  for (const GraphInput &in : train->inputs()) {
    if (in.role != InputRole::Parameter)
      continue;
    ++parameters;
    const Tensor &grad = out->at(autodiff::gradientName(in.name));
    Tensor &w = weights.at(in.name);
    for (int64_t k = 0; k < 3; ++k) {
      const int64_t j = (k * 7919 + 13) % w.numElements();
      const double numeric = reference.centralDifference(ids, w, j);
      EXPECT_NEAR(grad.getFloat(j), numeric, 1e-4 + 1e-3 * std::abs(numeric))
          << in.name << " element " << j;
    }
  }
  EXPECT_EQ(parameters, static_cast<int>(decoderParameters(config).size()));
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyReferenceTest,
                         ::testing::Values(Family{"Qwen2GroupedQuery", "qwen2-tiny", false},
                                           Family{"Qwen2TiedEmbeddings", "qwen2-tiny", true},
                                           Family{"Llama31BiasesRopeScaling", "llama-tiny", false},
                                           Family{"Qwen3HeadDimAndQkNormTied", "qwen3-tiny", true}),
                         [](const auto &info) { return std::string(info.param.name); });

// One config field changed from the tiny Qwen2 (null removes it).
Status parseWith(const std::string &field, const json &value,
                 const std::string &base = "qwen2-tiny") {
  std::ifstream in(example(base));
  json doc = json::parse(in);
  if (value.is_null())
    doc.erase(field);
  else
    doc[field] = value;
  auto config = parseDecoderConfig(doc, "config.json");
  return config.isOk() ? Status::ok() : Status(config.error());
}

TEST(DecoderFamilyTest, UnimplementedFeaturesAreErrorsNamingTheField) {
  struct Case {
    std::string field;
    json value;
    std::vector<std::string> fragments;
  };
  const std::vector<Case> cases = {
      {"hidden_act", "gelu", {"field 'hidden_act'", "\"gelu\""}},
      {"use_sliding_window", true, {"field 'use_sliding_window'", "sliding-window"}},
      {"num_experts", 64, {"field 'num_experts'", "mixture-of-experts"}},
      {"attention_dropout", 0.1, {"field 'attention_dropout'", "0.1"}},
      {"rope_scaling",
       json{{"rope_type", "yarn"}, {"factor", 4}},
       {"field 'rope_scaling.rope_type'", "\"yarn\""}},
      {"rope_scaling",
       json{{"rope_type", "llama3"}, {"factor", 8}},
       {"rope_scaling.low_freq_factor", "missing"}},
      {"num_key_value_heads",
       3,
       {"field 'num_key_value_heads'", "a divisor of num_attention_heads"}},
      {"num_key_value_heads", 8, {"field 'num_key_value_heads'"}},
      {"hidden_size", 66, {"field 'hidden_size'", "multiple of num_attention_heads"}},
      {"head_dim", 15, {"field 'head_dim'", "even"}},
      {"rms_norm_eps", nullptr, {"field 'rms_norm_eps'", "missing"}},
      {"architectures",
       json::array({"MistralForCausalLM"}),
       {"field 'architectures'", "Qwen2ForCausalLM", "LlamaForCausalLM", "Qwen3ForCausalLM",
        "QWenLMHeadModel"}},
  };
  for (const Case &c : cases) {
    Status s = parseWith(c.field, c.value);
    ASSERT_FALSE(s.isOk()) << c.field << " = " << c.value.dump();
    EXPECT_EQ(s.message().rfind("config.json: ", 0), 0u) << s.message();
    for (const std::string &f : c.fragments)
      EXPECT_NE(s.message().find(f), std::string::npos)
          << c.field << ": missing '" << f << "' in: " << s.message();
  }
  // Defaults where the classes have them: no key/value heads is MHA, no
  // head_dim is hidden / heads, no rope_theta is 10000.
  EXPECT_TRUE(parseWith("num_key_value_heads", nullptr).isOk());
  EXPECT_TRUE(parseWith("rope_theta", nullptr).isOk());
  EXPECT_TRUE(parseWith("rope_scaling", json{{"rope_type", "default"}}).isOk());
}

// Two key/value heads split over two ranks, replicated over four (each rank
// holds the one head its query head uses: k_proj [16, 64]); eight ranks do
// not divide the four query heads.
TEST(DecoderFamilyTest, TensorParallelismSplitsOrReplicatesTheKeyValueHeads) {
  const DecoderConfig config = load("qwen2-tiny"); // 4 query heads, 2 key/value heads of 16
  ModelOptions options{1, 8, DType::F32};
  options.tensor_parallel = 2;
  EXPECT_TRUE(buildDecoderForward(config, options).isOk());
  options.tensor_parallel = 4;
  auto graph = buildDecoderForward(config, options);
  ASSERT_TRUE(graph.isOk()) << graph.message();
  const GraphInput *k = graph->findInput("model.layers.0.self_attn.k_proj.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(graph->type(k->value).shape, (Shape{16, 64}));
  options.tensor_parallel = 8;
  auto eight = buildDecoderForward(config, options);
  ASSERT_FALSE(eight.isOk());
  EXPECT_NE(eight.message().find("num_attention_heads (4)"), std::string::npos) << eight.message();
}

TEST(DecoderFamilyTest, LoraTargetsAreTheFamilysNames) {
  const DecoderConfig config = load("qwen2-tiny");
  LoraConfig lora;
  lora.rank = 2;
  auto defaults = loraParameters(config, lora);
  ASSERT_TRUE(defaults.isOk()) << defaults.message();
  std::set<std::string> names;
  for (const ParamSpec &p : *defaults)
    names.insert(p.name);
  EXPECT_EQ(names.size(), 2u * 2u * 2u) << "q_proj and v_proj, A and B, two layers";
  EXPECT_TRUE(names.count("base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight"));
  lora.targets = {"all-linear"};
  auto all = loraParameters(config, lora);
  ASSERT_TRUE(all.isOk()) << all.message();
  EXPECT_EQ(all->size(), 7u * 2u * 2u) << "seven linears, A and B, two layers";
  lora.targets = {"c_attn"};
  auto qwen_name = loraParameters(config, lora);
  ASSERT_FALSE(qwen_name.isOk());
  EXPECT_NE(qwen_name.message().find("self_attn.q_proj"), std::string::npos) << qwen_name.message();
}

} // namespace
} // namespace kiln::frontend
