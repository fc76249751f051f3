// Table-driven parsing and validation of decoder config.json files: one
// table of fields for Qwen v1 (modeling_qwen.py's names), one for the
// families that share Llama's (Qwen2, Llama, Qwen3).
#include "compiler/frontend/decoder_config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <span>
#include <variant>

#include "support/file_io.h"

namespace kiln::frontend {

using nlohmann::json;

namespace {

enum class Range { Any, Positive, UnitInterval };

using Member = std::variant<int64_t DecoderConfig::*, double DecoderConfig::*,
                            bool DecoderConfig::*, std::optional<bool> DecoderConfig::*>;

struct FieldSpec {
  const char *name;
  Member member;
  bool required;
  Range range;
};

// Qwen v1's fields, as modeling_qwen.py's QWenConfig names them.
const FieldSpec kQwenV1Fields[] = {
    {"hidden_size", &DecoderConfig::hidden_size, true, Range::Positive},
    {"intermediate_size", &DecoderConfig::intermediate_size, true, Range::Positive},
    {"num_attention_heads", &DecoderConfig::num_attention_heads, true, Range::Positive},
    {"kv_channels", &DecoderConfig::head_dim, true, Range::Positive},
    {"num_hidden_layers", &DecoderConfig::num_hidden_layers, true, Range::Positive},
    {"vocab_size", &DecoderConfig::vocab_size, true, Range::Positive},
    {"seq_length", &DecoderConfig::seq_length, true, Range::Positive},
    {"max_position_embeddings", &DecoderConfig::max_position_embeddings, true, Range::Positive},
    {"layer_norm_epsilon", &DecoderConfig::rms_norm_eps, true, Range::Positive},
    {"rotary_emb_base", &DecoderConfig::rope_theta, true, Range::Positive},
    {"rotary_pct", &DecoderConfig::rotary_pct, true, Range::UnitInterval},
    {"no_bias", &DecoderConfig::no_bias, true, Range::Any},
    {"tie_word_embeddings", &DecoderConfig::tie_word_embeddings, true, Range::Any},
    {"use_logn_attn", &DecoderConfig::use_logn_attn, true, Range::Any},
    {"use_dynamic_ntk", &DecoderConfig::use_dynamic_ntk, true, Range::Any},
    {"scale_attn_weights", &DecoderConfig::scale_attn_weights, true, Range::Any},
    {"initializer_range", &DecoderConfig::initializer_range, false, Range::Positive},
    {"softmax_in_fp32", &DecoderConfig::softmax_in_fp32, false, Range::Any},
    {"fp16", &DecoderConfig::fp16, false, Range::Any},
    {"bf16", &DecoderConfig::bf16, false, Range::Any},
    {"fp32", &DecoderConfig::fp32, false, Range::Any},
};

// Qwen2ForCausalLM, LlamaForCausalLM and Qwen3ForCausalLM (their
// PretrainedConfig subclasses; optional fields take those classes' defaults).
const FieldSpec kLlamaNamedFields[] = {
    {"hidden_size", &DecoderConfig::hidden_size, true, Range::Positive},
    {"intermediate_size", &DecoderConfig::intermediate_size, true, Range::Positive},
    {"num_attention_heads", &DecoderConfig::num_attention_heads, true, Range::Positive},
    {"num_key_value_heads", &DecoderConfig::num_key_value_heads, false, Range::Positive},
    {"head_dim", &DecoderConfig::head_dim, false, Range::Positive},
    {"num_hidden_layers", &DecoderConfig::num_hidden_layers, true, Range::Positive},
    {"vocab_size", &DecoderConfig::vocab_size, true, Range::Positive},
    {"max_position_embeddings", &DecoderConfig::max_position_embeddings, true, Range::Positive},
    {"rms_norm_eps", &DecoderConfig::rms_norm_eps, true, Range::Positive},
    {"rope_theta", &DecoderConfig::rope_theta, false, Range::Positive},
    {"tie_word_embeddings", &DecoderConfig::tie_word_embeddings, false, Range::Any},
    {"attention_bias", &DecoderConfig::attention_bias, false, Range::Any},
    {"mlp_bias", &DecoderConfig::mlp_bias, false, Range::Any},
    {"initializer_range", &DecoderConfig::initializer_range, false, Range::Positive},
};

// Without seq_length, the sequence a model is built for when none is asked:
// max_position_embeddings (131,072 for Llama 3.1) would build a step no one
// trains; MindFormers' Qwen2.5 and Llama 3.1 fine-tune configs use 4096.
constexpr int64_t kDefaultSeq = 4096;

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
        using T = std::remove_cvref_t<decltype(std::declval<DecoderConfig>().*member)>;
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
Status readField(const FieldSpec &spec, const json &v, DecoderConfig &config,
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

// Checks one field's value against its range. An optional integer left at 0
// was absent.
Status checkRange(const FieldSpec &spec, const DecoderConfig &config, std::string_view source) {
  return std::visit(
      [&](auto member) -> Status {
        using T = std::remove_cvref_t<decltype(config.*member)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          int64_t v = config.*member;
          if (v == 0 && !spec.required)
            return Status::ok();
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

std::span<const FieldSpec> fieldsOf(const DecoderFamily &family) {
  if (family.intermediate_is_twice_mlp)
    return kQwenV1Fields;
  return kLlamaNamedFields;
}

Status readFields(const json &doc, std::span<const FieldSpec> fields, DecoderConfig &config,
                  std::string_view source) {
  for (const FieldSpec &spec : fields) {
    auto it = doc.find(spec.name);
    // An optional field written as null counts as absent.
    if (it == doc.end() || (!spec.required && it->is_null())) {
      if (spec.required)
        return fieldError(source, spec.name, expectedText(spec), "nothing (the field is missing)");
      continue;
    }
    KILN_RETURN_IF_ERROR(readField(spec, *it, config, source));
  }
  return Status::ok();
}

std::string architectureExpectation() {
  return "a list holding one of " + supportedArchitectures();
}

// Picks the family from "architectures"; checked before any other field: a
// config of another family is missing fields, and "wrong architecture" is the
// error worth reporting.
Status readArchitectures(const json &doc, DecoderConfig &config, std::string_view source) {
  auto it = doc.find("architectures");
  if (it == doc.end())
    return fieldError(source, "architectures", architectureExpectation(),
                      "nothing (the field is missing)");
  if (!it->is_array() ||
      !std::all_of(it->begin(), it->end(), [](const json &a) { return a.is_string(); }))
    return fieldError(source, "architectures", architectureExpectation(), describe(*it));
  config.architectures.clear();
  config.family = nullptr;
  for (const json &a : *it) {
    config.architectures.push_back(a.get<std::string>());
    if (!config.family)
      config.family = findDecoderFamily(config.architectures.back());
  }
  if (!config.family)
    return fieldError(source, "architectures", architectureExpectation(), describe(*it));
  return Status::ok();
}

// A field whose value kiln does not implement: "SOURCE: field 'F': kiln
// does not implement WHAT (got V)".
Error unsupported(std::string_view source, std::string_view field, const std::string &what,
                  const json &value) {
  return Error(std::string(source) + ": field '" + std::string(field) +
               "': kiln does not implement " + what + " (got " + describe(value) + ")");
}

// Features of the Llama-named families that kiln refuses rather than ignore:
// each would change what the model computes.
Status refuseUnimplemented(const json &doc, std::string_view source) {
  if (auto it = doc.find("hidden_act"); it != doc.end() && *it != "silu")
    return unsupported(source, "hidden_act", "an MLP activation other than \"silu\"", *it);
  if (auto it = doc.find("use_sliding_window"); it != doc.end() && *it != false)
    return unsupported(source, "use_sliding_window", "sliding-window attention", *it);
  for (const char *field :
       {"num_experts", "num_local_experts", "moe_intermediate_size", "num_experts_per_tok"})
    if (auto it = doc.find(field);
        it != doc.end() && !it->is_null() && !(it->is_number() && it->get<double>() == 0))
      return unsupported(source, field, "mixture-of-experts layers", *it);
  if (auto it = doc.find("attention_dropout");
      it != doc.end() && !(it->is_number() && it->get<double>() == 0))
    return unsupported(source, "attention_dropout", "dropout on the attention probabilities", *it);
  if (auto it = doc.find("pretraining_tp");
      it != doc.end() && !(it->is_number_integer() && it->get<int64_t>() == 1))
    return unsupported(source, "pretraining_tp", "Llama's sliced pretraining_tp linears", *it);
  return Status::ok();
}

Status readNumber(const json &scaling, const char *name, std::string_view source, double &out) {
  auto it = scaling.find(name);
  const std::string field = std::string("rope_scaling.") + name;
  if (it == scaling.end())
    return fieldError(source, field, "a positive number", "nothing (the field is missing)");
  if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() <= 0)
    return fieldError(source, field, "a positive number", describe(*it));
  out = it->get<double>();
  return Status::ok();
}

// rope_scaling: null, {"rope_type": "default"} or Llama 3.1's "llama3"
// (older files write "type").
Status readRopeScaling(const json &doc, DecoderConfig &config, std::string_view source) {
  auto it = doc.find("rope_scaling");
  if (it == doc.end() || it->is_null())
    return Status::ok();
  if (!it->is_object())
    return fieldError(source, "rope_scaling", "null or an object", describe(*it));
  auto type = it->find("rope_type");
  if (type == it->end())
    type = it->find("type");
  if (type == it->end() || !type->is_string())
    return fieldError(source, "rope_scaling.rope_type", "\"llama3\" or \"default\"",
                      type == it->end() ? "nothing (the field is missing)" : describe(*type));
  if (*type == "default")
    return Status::ok();
  if (*type != "llama3")
    return unsupported(source, "rope_scaling.rope_type",
                       "rope scaling other than \"llama3\" and \"default\"", *type);
  RopeScaling &s = config.rope_scaling;
  double original = 0;
  KILN_RETURN_IF_ERROR(readNumber(*it, "factor", source, s.factor));
  KILN_RETURN_IF_ERROR(readNumber(*it, "low_freq_factor", source, s.low_freq_factor));
  KILN_RETURN_IF_ERROR(readNumber(*it, "high_freq_factor", source, s.high_freq_factor));
  KILN_RETURN_IF_ERROR(readNumber(*it, "original_max_position_embeddings", source, original));
  if (s.high_freq_factor <= s.low_freq_factor)
    return fieldError(source, "rope_scaling.high_freq_factor",
                      "a number above low_freq_factor (" + numberText(s.low_freq_factor) + ")",
                      numberText(s.high_freq_factor));
  if (original != std::floor(original) || original > static_cast<double>(kMaxSize))
    return fieldError(source, "rope_scaling.original_max_position_embeddings", "a positive integer",
                      numberText(original));
  s.original_max_position_embeddings = static_cast<int64_t>(original);
  return Status::ok();
}

// What the Llama-named families leave out takes their classes' defaults.
void completeLlamaNamed(DecoderConfig &config) {
  if (config.num_key_value_heads == 0)
    config.num_key_value_heads = config.num_attention_heads;
  if (config.head_dim == 0 && config.num_attention_heads > 0)
    config.head_dim = config.hidden_size / config.num_attention_heads;
  if (config.rope_theta == 0)
    config.rope_theta = 10000;
  config.seq_length = std::min(config.max_position_embeddings, kDefaultSeq);
  config.softmax_in_fp32 = true;
  config.scale_attn_weights = true;
  config.rotary_pct = 1;
}

std::string product(int64_t a, int64_t b) {
  return std::to_string(a) + " * " + std::to_string(b) + " = " + std::to_string(a * b);
}

Status checkHeads(const DecoderConfig &config, std::string_view source) {
  const int64_t heads = config.num_attention_heads, kv = config.kvHeads();
  if (config.family->intermediate_is_twice_mlp) {
    if (heads * config.head_dim != config.hidden_size)
      return fieldError(source, "kv_channels",
                        "num_attention_heads * kv_channels to equal hidden_size (" +
                            std::to_string(config.hidden_size) + ")",
                        product(heads, config.head_dim));
    if (kv != heads)
      return fieldError(source, "num_key_value_heads",
                        "no grouped-query attention in QWenLMHeadModel", std::to_string(kv));
  }
  if (kv > heads || heads % kv != 0)
    return fieldError(source, "num_key_value_heads",
                      "a divisor of num_attention_heads (" + std::to_string(heads) +
                          "): each key/value head serves a group of query heads",
                      std::to_string(kv));
  if (!config.family->intermediate_is_twice_mlp && config.head_dim * heads > kMaxSize)
    return fieldError(source, "head_dim", "num_attention_heads * head_dim of at most 2^31 - 1",
                      product(heads, config.head_dim));
  return Status::ok();
}

} // namespace

int64_t DecoderConfig::rotaryDim() const {
  // int(kv_channels * rotary_pct) as modeling_qwen.py computes it; the slack
  // keeps products such as 128 * 0.75 from truncating one below.
  return static_cast<int64_t>(std::floor(static_cast<double>(head_dim) * rotary_pct + 1e-9));
}

bool DecoderConfig::hasBias(BiasRule rule) const {
  switch (rule) {
  case BiasRule::Always:
    return true;
  case BiasRule::Never:
    return false;
  case BiasRule::UnlessNoBias:
    return !no_bias;
  case BiasRule::AttentionBias:
    return attention_bias;
  case BiasRule::MlpBias:
    return mlp_bias;
  }
  return false;
}

Status validateDecoderConfig(const DecoderConfig &config, std::string_view source) {
  if (!config.family)
    return Error(std::string(source) + ": no model family (expected one of " +
                 supportedArchitectures() + ")");
  for (const FieldSpec &spec : fieldsOf(*config.family))
    KILN_RETURN_IF_ERROR(checkRange(spec, config, source));

  if (config.num_hidden_layers > kMaxLayers)
    return fieldError(source, "num_hidden_layers",
                      "at most " + std::to_string(kMaxLayers) + " layers",
                      std::to_string(config.num_hidden_layers));
  if (config.head_dim <= 0)
    return fieldError(source, "head_dim",
                      "a positive integer (or hidden_size a multiple of num_attention_heads)",
                      std::to_string(config.head_dim));
  KILN_RETURN_IF_ERROR(checkHeads(config, source));
  // The largest weight matrix: the embedding or LM head [vocab, hidden], the
  // attention's query projection [heads * head_dim, hidden] (Qwen v1: c_attn,
  // three of them) or the MLP's [mlp, hidden].
  const int64_t q_rows =
      (config.family->fused_qkv ? 3 : 1) * config.num_attention_heads * config.head_dim;
  const std::pair<const char *, int64_t> rows[] = {{"vocab_size", config.vocab_size},
                                                   {"hidden_size", q_rows},
                                                   {"intermediate_size", config.mlpWidth()}};
  for (const auto &[field, n] : rows) {
    int64_t elements = 0;
    if (__builtin_mul_overflow(n, config.hidden_size, &elements) || elements > kMaxWeightElements)
      return fieldError(source, field, "sizes whose largest weight has at most 2^36 elements",
                        "a weight of " + std::to_string(n) + " x " +
                            std::to_string(config.hidden_size) + " elements");
  }
  if (config.family->intermediate_is_twice_mlp && config.intermediate_size % 2 != 0)
    return fieldError(source, "intermediate_size",
                      "an even number (the MLP width is intermediate_size / 2)",
                      std::to_string(config.intermediate_size));
  int64_t rotary = config.rotaryDim();
  if (rotary <= 0 || rotary % 2 != 0) {
    if (config.family->intermediate_is_twice_mlp)
      return fieldError(source, "rotary_pct",
                        "kv_channels * rotary_pct to give an even rotary dimension (rotate_half "
                        "splits it in two halves)",
                        std::to_string(config.head_dim) + " * " + numberText(config.rotary_pct) +
                            " = " + std::to_string(rotary));
    return fieldError(source, "head_dim",
                      "an even number (rotate_half splits each head in two halves)",
                      std::to_string(config.head_dim));
  }
  return Status::ok();
}

Expected<DecoderConfig> parseDecoderConfig(const json &doc, std::string_view source) {
  if (!doc.is_object())
    return Error(std::string(source) +
                 ": expected a JSON object (a Hugging Face config.json), got " + describe(doc));
  DecoderConfig config;
  KILN_RETURN_IF_ERROR(readArchitectures(doc, config, source));
  KILN_RETURN_IF_ERROR(readFields(doc, fieldsOf(*config.family), config, source));
  if (!config.family->intermediate_is_twice_mlp) {
    KILN_RETURN_IF_ERROR(refuseUnimplemented(doc, source));
    KILN_RETURN_IF_ERROR(readRopeScaling(doc, config, source));
    if (config.num_attention_heads > 0 && config.head_dim == 0 &&
        config.hidden_size % config.num_attention_heads != 0)
      return fieldError(source, "hidden_size",
                        "a multiple of num_attention_heads (" +
                            std::to_string(config.num_attention_heads) +
                            ") when the config has no head_dim",
                        std::to_string(config.hidden_size));
    completeLlamaNamed(config);
  }
  KILN_RETURN_IF_ERROR(validateDecoderConfig(config, source));
  return config;
}

Expected<DecoderConfig> readDecoderConfig(const std::string &path) {
  KILN_ASSIGN_OR_RETURN(json doc, readJsonFile(path));
  return parseDecoderConfig(doc, path);
}

} // namespace kiln::frontend
