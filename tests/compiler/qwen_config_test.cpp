// Tests of the QWenLMHeadModel config.json parser: the example files and every bad case.
#include "compiler/frontend/decoder_config.h"

#include <filesystem>
#include <unistd.h>

#include <gtest/gtest.h>

#include "support/file_io.h"

namespace kiln::frontend {
namespace {

std::string sourcePath(const std::string &relative) {
  return std::string(KILN_SOURCE_DIR) + "/" + relative;
}

nlohmann::json tinyJson() {
  auto doc = readJsonFile(sourcePath("examples/qwen-tiny/config.json"));
  EXPECT_TRUE(doc.isOk()) << doc.message();
  return doc.isOk() ? *doc : nlohmann::json::object();
}

// The Qwen-14B values published on the HF hub (reference/ascend-facts.md).
TEST(QwenConfigTest, ParsesQwen14B) {
  auto config = readDecoderConfig(sourcePath("examples/qwen-14b/config.json"));
  ASSERT_TRUE(config.isOk()) << config.message();
  EXPECT_EQ(config->architectures, std::vector<std::string>{"QWenLMHeadModel"});
  EXPECT_EQ(config->hidden_size, 5120);
  EXPECT_EQ(config->intermediate_size, 27392);
  EXPECT_EQ(config->mlpWidth(), 13696);
  EXPECT_EQ(config->num_attention_heads, 40);
  EXPECT_EQ(config->head_dim, 128);
  EXPECT_EQ(config->num_hidden_layers, 40);
  EXPECT_EQ(config->vocab_size, 152064);
  EXPECT_EQ(config->seq_length, 2048);
  EXPECT_EQ(config->max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(config->rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(config->rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(config->rotary_pct, 1.0);
  EXPECT_EQ(config->rotaryDim(), 128);
  EXPECT_TRUE(config->no_bias);
  EXPECT_FALSE(config->tie_word_embeddings);
  EXPECT_TRUE(config->use_logn_attn);
  EXPECT_TRUE(config->use_dynamic_ntk);
  EXPECT_TRUE(config->scale_attn_weights);
  EXPECT_DOUBLE_EQ(config->initializer_range, 0.02);
  EXPECT_FALSE(config->softmax_in_fp32);
  EXPECT_EQ(config->fp16, std::optional<bool>(false));
  EXPECT_EQ(config->bf16, std::optional<bool>(false));
}

TEST(QwenConfigTest, ParsesTiny) {
  auto config = readDecoderConfig(sourcePath("examples/qwen-tiny/config.json"));
  ASSERT_TRUE(config.isOk()) << config.message();
  EXPECT_EQ(config->hidden_size, 64);
  EXPECT_EQ(config->num_attention_heads, 4);
  EXPECT_EQ(config->head_dim, 16);
  EXPECT_EQ(config->num_hidden_layers, 2);
  EXPECT_EQ(config->intermediate_size, 256);
  EXPECT_EQ(config->mlpWidth(), 128);
  EXPECT_EQ(config->vocab_size, 512);
  EXPECT_EQ(config->seq_length, 32);
  EXPECT_EQ(config->max_position_embeddings, 64);
}

TEST(QwenConfigTest, OptionalFieldsDefaultAndUnknownFieldsAreIgnored) {
  nlohmann::json doc = tinyJson();
  doc.erase("initializer_range");
  doc.erase("softmax_in_fp32");
  doc.erase("fp16");
  doc.erase("bf16");
  doc.erase("fp32");
  doc["some_future_field"] = {{"nested", "whatever"}};
  doc["use_flash_attn"] = "auto";
  auto config = parseDecoderConfig(doc, "inline.json");
  ASSERT_TRUE(config.isOk()) << config.message();
  EXPECT_DOUBLE_EQ(config->initializer_range, 0.02);
  EXPECT_FALSE(config->softmax_in_fp32);
  EXPECT_FALSE(config->fp16.has_value());
  EXPECT_FALSE(config->bf16.has_value());
  EXPECT_FALSE(config->fp32.has_value());
}

TEST(QwenConfigTest, ReadsOptionalFieldsWhenPresent) {
  nlohmann::json doc = tinyJson();
  doc["initializer_range"] = 0.01;
  doc["softmax_in_fp32"] = true;
  doc["bf16"] = true;
  auto config = parseDecoderConfig(doc, "inline.json");
  ASSERT_TRUE(config.isOk()) << config.message();
  EXPECT_DOUBLE_EQ(config->initializer_range, 0.01);
  EXPECT_TRUE(config->softmax_in_fp32);
  EXPECT_EQ(config->bf16, std::optional<bool>(true));
}

TEST(QwenConfigTest, PartialRotaryDimension) {
  nlohmann::json doc = tinyJson();
  doc["rotary_pct"] = 0.5;
  auto config = parseDecoderConfig(doc, "inline.json");
  ASSERT_TRUE(config.isOk()) << config.message();
  EXPECT_EQ(config->rotaryDim(), 8);
}

struct BadFile {
  const char *file;
  const char *field;
  const char *expected; // a fragment of the "expected ..." part
  const char *got;      // a fragment of the "got ..." part
};

class BadConfigFileTest : public ::testing::TestWithParam<BadFile> {};

TEST_P(BadConfigFileTest, NamesFileAndField) {
  const BadFile &bad = GetParam();
  const std::string path = sourcePath(std::string("tests/compiler/data/") + bad.file);
  auto config = readDecoderConfig(path);
  ASSERT_FALSE(config.isOk()) << bad.file << " should be rejected";
  const std::string &msg = config.message();
  EXPECT_EQ(msg.rfind(path + ": field '" + bad.field + "': expected ", 0), 0u) << msg;
  EXPECT_NE(msg.find(bad.expected), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::string(", got ") + bad.got), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, BadConfigFileTest,
    ::testing::Values(
        BadFile{"qwen_missing_field.json", "vocab_size", "a positive integer", "nothing"},
        BadFile{"qwen_wrong_type.json", "hidden_size", "a positive integer", "the string \"64\""},
        BadFile{"qwen_wrong_bool.json", "no_bias", "true or false", "the string \"true\""},
        BadFile{"qwen_non_positive.json", "num_hidden_layers", "a positive integer", "0"},
        BadFile{"qwen_heads_mismatch.json", "kv_channels", "equal hidden_size (64)", "4 * 15 = 60"},
        BadFile{"qwen_odd_rotary.json", "rotary_pct", "even rotary dimension", "16 * 0.5625 = 9"},
        BadFile{"qwen_odd_intermediate.json", "intermediate_size", "an even number", "255"},
        BadFile{"qwen_bad_architecture.json", "architectures", "QWenLMHeadModel, Qwen2ForCausalLM",
                "the array [\"MistralForCausalLM\"]"}));

TEST(QwenConfigTest, InvalidJsonNamesFile) {
  const std::string path = sourcePath("tests/compiler/data/qwen_invalid_json.json");
  auto config = readDecoderConfig(path);
  ASSERT_FALSE(config.isOk());
  EXPECT_EQ(config.message().rfind(path + ": invalid JSON", 0), 0u) << config.message();
}

TEST(QwenConfigTest, MissingFileNamesFile) {
  auto config = readDecoderConfig("no/such/config.json");
  ASSERT_FALSE(config.isOk());
  EXPECT_NE(config.message().find("no/such/config.json"), std::string::npos);
}

// Inline variants of the fixture cases that need no file of their own.
TEST(QwenConfigTest, RejectsIllTypedAndOutOfRangeValues) {
  struct Case {
    const char *field;
    nlohmann::json value;
    const char *got;
  };
  const Case cases[] = {
      {"hidden_size", 64.0, "64.0"},
      {"hidden_size", -64, "-64"},
      {"vocab_size", nullptr, "null"},
      {"seq_length", nlohmann::json::array({32}), "the array [32]"},
      {"rotary_pct", 1.5, "1.5"},
      {"rotary_pct", 0, "0"},
      {"layer_norm_epsilon", "1e-6", "the string \"1e-6\""},
      {"initializer_range", "0.02", "the string \"0.02\""},
      {"softmax_in_fp32", 1, "1"},
      {"max_position_embeddings", 1ull << 40, "1099511627776"},
  };
  for (const Case &c : cases) {
    nlohmann::json doc = tinyJson();
    doc[c.field] = c.value;
    auto config = parseDecoderConfig(doc, "inline.json");
    ASSERT_FALSE(config.isOk()) << c.field << " = " << c.value.dump();
    const std::string &msg = config.message();
    EXPECT_EQ(msg.rfind(std::string("inline.json: field '") + c.field + "': expected ", 0), 0u)
        << msg;
    EXPECT_NE(msg.find(std::string(", got ") + c.got), std::string::npos) << msg;
  }
}

TEST(QwenConfigTest, RejectsMissingArchitecturesAndNonObjects) {
  nlohmann::json doc = tinyJson();
  doc.erase("architectures");
  auto missing = parseDecoderConfig(doc, "a.json");
  ASSERT_FALSE(missing.isOk());
  EXPECT_NE(missing.message().find("a.json: field 'architectures'"), std::string::npos);

  auto array = parseDecoderConfig(nlohmann::json::array(), "b.json");
  ASSERT_FALSE(array.isOk());
  EXPECT_EQ(array.message().rfind("b.json: expected a JSON object", 0), 0u) << array.message();
}

// Resource limits: a config claiming 10^6 layers or a 10^12-element weight is
// refused before any graph is built or tensor allocated.
TEST(QwenConfigTest, RefusesAbsurdSizes) {
  struct Case {
    nlohmann::json changes;
    const char *field;
    const char *expected;
  };
  const Case cases[] = {
      {{{"num_hidden_layers", 1'000'000}}, "num_hidden_layers", "at most 1024 layers"},
      {{{"vocab_size", 1'000'000},
        {"hidden_size", 1'000'000},
        {"num_attention_heads", 1000},
        {"kv_channels", 1000}},
       "vocab_size",
       "largest weight has at most 2^36 elements"},
      {{{"intermediate_size", 2'000'000'000}, {"hidden_size", 1024}, {"kv_channels", 256}},
       "intermediate_size",
       "at most 2^36 elements"},
  };
  for (const Case &c : cases) {
    nlohmann::json doc = tinyJson();
    doc.update(c.changes);
    auto config = parseDecoderConfig(doc, "inline.json");
    ASSERT_FALSE(config.isOk()) << c.changes.dump();
    const std::string &msg = config.message();
    EXPECT_EQ(msg.rfind(std::string("inline.json: field '") + c.field + "': expected ", 0), 0u)
        << msg;
    EXPECT_NE(msg.find(c.expected), std::string::npos) << msg;
  }
  nlohmann::json doc = tinyJson();
  doc["num_hidden_layers"] = 1024;
  EXPECT_TRUE(parseDecoderConfig(doc, "inline.json").isOk());
}

// Found by tests/fuzz: a config nested 10^5 deep overflowed the stack while
// its error message was written.
TEST(QwenConfigTest, DeeplyNestedFileIsRefused) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("kiln_deep_config_" + std::to_string(::getpid()) + ".json"))
                               .string();
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  ASSERT_TRUE(writeFileAtomic(path, R"({"architectures": )" + deep + "}"));
  auto config = readDecoderConfig(path);
  std::filesystem::remove(path);
  ASSERT_FALSE(config.isOk());
  EXPECT_EQ(config.message().rfind(path + ": invalid JSON", 0), 0u) << config.message();
}

TEST(QwenConfigTest, ValidatesConfigsBuiltInCode) {
  auto config = parseDecoderConfig(tinyJson(), "inline.json");
  ASSERT_TRUE(config.isOk()) << config.message();
  DecoderConfig c = *config;
  EXPECT_TRUE(validateDecoderConfig(c, "code").isOk());
  c.num_attention_heads = 8;
  Status s = validateDecoderConfig(c, "code");
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message().rfind("code: field 'kv_channels'", 0), 0u) << s.message();
}

} // namespace
} // namespace kiln::frontend
