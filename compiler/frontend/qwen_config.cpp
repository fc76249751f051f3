// Table-driven parsing and validation of QWenLMHeadModel config.json files.
#include "compiler/frontend/qwen_config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <variant>

#include "ir/file_io.h"

namespace kiln::frontend {

using nlohmann::json;

namespace {

enum class Range { Any, Positive, UnitInterval };

using Member = std::variant<int64_t QwenConfig::*, double QwenConfig::*, bool QwenConfig::*,
                            std::optional<bool> QwenConfig::*>;

struct FieldSpec {
  const char *name;
  Member member;
  bool required;
  Range range;
};

// Every scalar field kiln reads; "architectures" is checked on its own.
const FieldSpec kFields[] = {
    {"hidden_size", &QwenConfig::hidden_size, true, Range::Positive},
    {"intermediate_size", &QwenConfig::intermediate_size, true, Range::Positive},
    {"num_attention_heads", &QwenConfig::num_attention_heads, true, Range::Positive},
    {"kv_channels", &QwenConfig::kv_channels, true, Range::Positive},
    {"num_hidden_layers", &QwenConfig::num_hidden_layers, true, Range::Positive},
    {"vocab_size", &QwenConfig::vocab_size, true, Range::Positive},
    {"seq_length", &QwenConfig::seq_length, true, Range::Positive},
    {"max_position_embeddings", &QwenConfig::max_position_embeddings, true, Range::Positive},
    {"layer_norm_epsilon", &QwenConfig::layer_norm_epsilon, true, Range::Positive},
    {"rotary_emb_base", &QwenConfig::rotary_emb_base, true, Range::Positive},
    {"rotary_pct", &QwenConfig::rotary_pct, true, Range::UnitInterval},
    {"no_bias", &QwenConfig::no_bias, true, Range::Any},
    {"tie_word_embeddings", &QwenConfig::tie_word_embeddings, true, Range::Any},
    {"use_logn_attn", &QwenConfig::use_logn_attn, true, Range::Any},
    {"use_dynamic_ntk", &QwenConfig::use_dynamic_ntk, true, Range::Any},
    {"scale_attn_weights", &QwenConfig::scale_attn_weights, true, Range::Any},
    {"initializer_range", &QwenConfig::initializer_range, false, Range::Positive},
    {"softmax_in_fp32", &QwenConfig::softmax_in_fp32, false, Range::Any},
    {"fp16", &QwenConfig::fp16, false, Range::Any},
    {"bf16", &QwenConfig::bf16, false, Range::Any},
    {"fp32", &QwenConfig::fp32, false, Range::Any},
};

// Sizes beyond this make element counts overflow long before they make sense.
constexpr int64_t kMaxSize = (int64_t{1} << 31) - 1;
// Real models have at most a few hundred layers; a config claiming 10^6 would
// have kiln build a graph of 10^8 nodes before anything else could object.
constexpr int64_t kMaxLayers = 1024;
// The largest weight a config may imply: 2^36 elements (256 GiB in f32),
// 50 times Qwen-72B's embedding. A 10^12-element tensor is a broken config.
constexpr int64_t kMaxWeightElements = int64_t{1} << 36;

std::string numberText(double v) {
  char buf[32];
  auto result = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, result.ptr);
}

// How a JSON value is shown after "got".
std::string describe(const json &v) {
  std::string text = v.dump();
  if (text.size() > 60)
    text = text.substr(0, 57) + "...";
  if (v.is_string())
    return "the string " + text;
  if (v.is_array())
    return "the array " + text;
  if (v.is_object())
    return "an object";
  return text;
}

std::string expectedText(const FieldSpec &spec) {
  return std::visit(
      [&](auto member) -> std::string {
        using T = std::remove_cvref_t<decltype(std::declval<QwenConfig>().*member)>;
        if constexpr (std::is_same_v<T, int64_t>)
          return "a positive integer";
        else if constexpr (std::is_same_v<T, double>)
          return spec.range == Range::UnitInterval ? "a number in (0, 1]" : "a positive number";
        else
          return "true or false";
      },
      spec.member);
}

Error fieldError(std::string_view source, std::string_view field, const std::string &expected,
                 const std::string &got) {
  return Error(std::string(source) + ": field '" + std::string(field) + "': expected " + expected +
               ", got " + got);
}

// Reads one field's JSON value into the config, checking only its JSON type.
Status readField(const FieldSpec &spec, const json &v, QwenConfig &config,
                 std::string_view source) {
  auto mismatch = [&] { return fieldError(source, spec.name, expectedText(spec), describe(v)); };
  return std::visit(
      [&](auto member) -> Status {
        using T = std::remove_cvref_t<decltype(config.*member)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          if (!v.is_number_integer())
            return mismatch();
          if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(kMaxSize))
            return fieldError(source, spec.name,
                              "a positive integer of at most " + std::to_string(kMaxSize),
                              v.dump());
          config.*member = v.get<int64_t>();
        } else if constexpr (std::is_same_v<T, double>) {
          if (!v.is_number())
            return mismatch();
          config.*member = v.get<double>();
        } else {
          if (!v.is_boolean())
            return mismatch();
          config.*member = v.get<bool>();
        }
        return Status::ok();
      },
      spec.member);
}

// Checks one field's value against its range.
Status checkRange(const FieldSpec &spec, const QwenConfig &config, std::string_view source) {
  return std::visit(
      [&](auto member) -> Status {
        using T = std::remove_cvref_t<decltype(config.*member)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          int64_t v = config.*member;
          if (v <= 0)
            return fieldError(source, spec.name, expectedText(spec), std::to_string(v));
          if (v > kMaxSize)
            return fieldError(source, spec.name,
                              "a positive integer of at most " + std::to_string(kMaxSize),
                              std::to_string(v));
        } else if constexpr (std::is_same_v<T, double>) {
          double v = config.*member;
          bool ok = std::isfinite(v) && v > 0 && (spec.range != Range::UnitInterval || v <= 1.0);
          if (!ok)
            return fieldError(source, spec.name, expectedText(spec), numberText(v));
        }
        return Status::ok();
      },
      spec.member);
}

Status checkArchitecture(const QwenConfig &config, std::string_view source) {
  const auto &archs = config.architectures;
  if (std::find(archs.begin(), archs.end(), kQwenArchitecture) != archs.end())
    return Status::ok();
  return fieldError(source, "architectures",
                    "a list holding \"" + std::string(kQwenArchitecture) +
                        "\" (the only architecture kiln builds)",
                    describe(json(archs)));
}

Status readArchitectures(const json &doc, QwenConfig &config, std::string_view source) {
  const std::string expected = "a list holding \"" + std::string(kQwenArchitecture) +
                               "\" (the only architecture kiln builds)";
  auto it = doc.find("architectures");
  if (it == doc.end())
    return fieldError(source, "architectures", expected, "nothing (the field is missing)");
  if (!it->is_array() ||
      !std::all_of(it->begin(), it->end(), [](const json &a) { return a.is_string(); }))
    return fieldError(source, "architectures", expected, describe(*it));
  config.architectures.clear();
  for (const json &a : *it)
    config.architectures.push_back(a.get<std::string>());
  // Checked before any other field: a Llama config is missing Qwen fields,
  // and "wrong architecture" is the error worth reporting.
  return checkArchitecture(config, source);
}

} // namespace

int64_t QwenConfig::rotaryDim() const {
  // int(kv_channels * rotary_pct) as modeling_qwen.py computes it; the slack
  // keeps products such as 128 * 0.75 from truncating one below.
  return static_cast<int64_t>(std::floor(static_cast<double>(kv_channels) * rotary_pct + 1e-9));
}

Status validateQwenConfig(const QwenConfig &config, std::string_view source) {
  KILN_RETURN_IF_ERROR(checkArchitecture(config, source));
  for (const FieldSpec &spec : kFields)
    KILN_RETURN_IF_ERROR(checkRange(spec, config, source));

  if (config.num_hidden_layers > kMaxLayers)
    return fieldError(source, "num_hidden_layers",
                      "at most " + std::to_string(kMaxLayers) + " layers",
                      std::to_string(config.num_hidden_layers));
  // The largest weight matrix: the embedding or LM head [vocab, hidden], the
  // attention's c_attn [3 * hidden, hidden] or the MLP's [mlp, hidden].
  const std::pair<const char *, int64_t> rows[] = {{"vocab_size", config.vocab_size},
                                                   {"hidden_size", 3 * config.hidden_size},
                                                   {"intermediate_size", config.mlpWidth()}};
  for (const auto &[field, n] : rows) {
    int64_t elements = 0;
    if (__builtin_mul_overflow(n, config.hidden_size, &elements) || elements > kMaxWeightElements)
      return fieldError(source, field, "sizes whose largest weight has at most 2^36 elements",
                        "a weight of " + std::to_string(n) + " x " +
                            std::to_string(config.hidden_size) + " elements");
  }
  if (config.num_attention_heads * config.kv_channels != config.hidden_size)
    return fieldError(source, "kv_channels",
                      "num_attention_heads * kv_channels to equal hidden_size (" +
                          std::to_string(config.hidden_size) + ")",
                      std::to_string(config.num_attention_heads) + " * " +
                          std::to_string(config.kv_channels) + " = " +
                          std::to_string(config.num_attention_heads * config.kv_channels));
  if (config.intermediate_size % 2 != 0)
    return fieldError(source, "intermediate_size",
                      "an even number (the MLP width is intermediate_size / 2)",
                      std::to_string(config.intermediate_size));
  int64_t rotary = config.rotaryDim();
  if (rotary <= 0 || rotary % 2 != 0)
    return fieldError(source, "rotary_pct",
                      "kv_channels * rotary_pct to give an even rotary dimension (rotate_half "
                      "splits it in two halves)",
                      std::to_string(config.kv_channels) + " * " + numberText(config.rotary_pct) +
                          " = " + std::to_string(rotary));
  return Status::ok();
}

Expected<QwenConfig> parseQwenConfig(const json &doc, std::string_view source) {
  if (!doc.is_object())
    return Error(std::string(source) +
                 ": expected a JSON object (a Hugging Face config.json), got " + describe(doc));
  QwenConfig config;
  KILN_RETURN_IF_ERROR(readArchitectures(doc, config, source));
  for (const FieldSpec &spec : kFields) {
    auto it = doc.find(spec.name);
    // An optional field written as null counts as absent.
    if (it == doc.end() || (!spec.required && it->is_null())) {
      if (spec.required)
        return fieldError(source, spec.name, expectedText(spec), "nothing (the field is missing)");
      continue;
    }
    KILN_RETURN_IF_ERROR(readField(spec, *it, config, source));
  }
  KILN_RETURN_IF_ERROR(validateQwenConfig(config, source));
  return config;
}

Expected<QwenConfig> readQwenConfig(const std::string &path) {
  KILN_ASSIGN_OR_RETURN(json doc, readJsonFile(path));
  return parseQwenConfig(doc, path);
}

} // namespace kiln::frontend
