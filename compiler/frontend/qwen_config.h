// The Hugging Face QWenLMHeadModel configuration (config.json) and its parser.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/error.h"

namespace kiln::frontend {

// The one architecture the frontend builds.
inline constexpr std::string_view kQwenArchitecture = "QWenLMHeadModel";

struct QwenConfig {
  std::vector<std::string> architectures;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0; // twice the MLP width, as in modeling_qwen.py
  int64_t num_attention_heads = 0;
  int64_t kv_channels = 0; // head dimension
  int64_t num_hidden_layers = 0;
  int64_t vocab_size = 0;
  int64_t seq_length = 0;
  int64_t max_position_embeddings = 0;
  double layer_norm_epsilon = 0;
  double rotary_emb_base = 0;
  double rotary_pct = 0;
  bool no_bias = true;
  bool tie_word_embeddings = false;
  bool use_logn_attn = false;
  bool use_dynamic_ntk = false;
  bool scale_attn_weights = true;
  double initializer_range = 0.02;
  bool softmax_in_fp32 = false;
  // Informational precision flags of the checkpoint; absent when the file has none.
  std::optional<bool> fp16;
  std::optional<bool> bf16;
  std::optional<bool> fp32;

  int64_t mlpWidth() const { return intermediate_size / 2; }
  int64_t headDim() const { return kv_channels; }
  // Channels of each head that the rotary embedding turns: kv_channels * rotary_pct.
  int64_t rotaryDim() const;
};

// Parses a config.json document; `source` names the file in errors, which read
// "SOURCE: field 'X': expected ..., got ...". Unknown fields are ignored.
Expected<QwenConfig> parseQwenConfig(const nlohmann::json &json, std::string_view source);
Expected<QwenConfig> readQwenConfig(const std::string &path);

// The checks parseQwenConfig applies after reading the fields (sizes positive,
// heads * kv_channels == hidden_size, even MLP and rotary widths, ...), for
// configs built in code.
Status validateQwenConfig(const QwenConfig &config, std::string_view source);

} // namespace kiln::frontend
