// A Hugging Face decoder's configuration (config.json) of any family kiln
// builds (decoder_family.h), read into one normalised form, and its parser.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/frontend/decoder_family.h"
#include "support/error.h"

namespace kiln::frontend {

// rope_scaling of type "llama3" (Llama 3.1 and 3.2): low frequencies divided
// by `factor`, high ones kept, the band between blended. factor 1 is no
// scaling.
struct RopeScaling {
  double factor = 1;
  double low_freq_factor = 1;
  double high_freq_factor = 4;
  int64_t original_max_position_embeddings = 8192;

  bool enabled() const { return factor != 1; }
};

struct DecoderConfig {
  // The family of the architecture the config names; never null once
  // parsed (decoderFamilies().front(), Qwen v1, for a config built in code).
  const DecoderFamily *family = &decoderFamilies().front();
  std::vector<std::string> architectures;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0; // as the file writes it (Qwen v1: twice the MLP width)
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0; // 0: as many as query heads
  int64_t head_dim = 0;            // Qwen v1's kv_channels
  int64_t num_hidden_layers = 0;
  int64_t vocab_size = 0;
  // The sequence length a model is built for when none is asked: Qwen v1's
  // seq_length; the other families' max_position_embeddings, at most 4096.
  int64_t seq_length = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 0;     // Qwen v1's layer_norm_epsilon
  double rope_theta = 0;       // Qwen v1's rotary_emb_base
  double rotary_pct = 1;       // Qwen v1: the share of each head the rotary turns
  RopeScaling rope_scaling;    // Llama 3.1's "llama3"
  bool no_bias = true;         // Qwen v1
  bool attention_bias = false; // Llama, Qwen3
  bool mlp_bias = false;       // Llama
  bool tie_word_embeddings = false;
  bool use_logn_attn = false;   // Qwen v1, read but only used past seq_length
  bool use_dynamic_ntk = false; // Qwen v1, likewise
  bool scale_attn_weights = true;
  // Qwen v1's flag (default false); the other families always take the
  // softmax in f32.
  bool softmax_in_fp32 = false;
  double initializer_range = 0.02;
  // Informational precision flags of a Qwen v1 checkpoint; absent when the file has none.
  std::optional<bool> fp16;
  std::optional<bool> bf16;
  std::optional<bool> fp32;

  int64_t mlpWidth() const {
    return family->intermediate_is_twice_mlp ? intermediate_size / 2 : intermediate_size;
  }
  int64_t headDim() const { return head_dim; }
  int64_t kvHeads() const {
    return num_key_value_heads > 0 ? num_key_value_heads : num_attention_heads;
  }
  // Query heads per key/value head (1: multi-head attention).
  int64_t groupSize() const { return num_attention_heads / kvHeads(); }
  // Channels of each head that the rotary embedding turns: head_dim * rotary_pct.
  int64_t rotaryDim() const;
  bool hasBias(BiasRule rule) const;
};

// Parses a config.json document; `source` names the file in errors, which read
// "SOURCE: field 'X': expected ..., got ...". Unknown fields are ignored;
// fields of features kiln does not implement (sliding-window attention, mixture
// of experts, an unknown rope_scaling type, an activation other than silu,
// attention dropout) are errors naming the field and its value.
Expected<DecoderConfig> parseDecoderConfig(const nlohmann::json &json, std::string_view source);
Expected<DecoderConfig> readDecoderConfig(const std::string &path);

// The checks parseDecoderConfig applies after reading the fields (sizes
// positive, head counts consistent, even rotary widths, ...), for configs
// built in code.
Status validateDecoderConfig(const DecoderConfig &config, std::string_view source);

} // namespace kiln::frontend
