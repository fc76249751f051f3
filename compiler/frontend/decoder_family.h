// Decoder families as data: how each Hugging Face architecture kiln builds
// names and shapes the parts of one pre-norm decoder (embedding, N layers of
// RMSNorm -> attention -> residual -> RMSNorm -> gated MLP -> residual, a
// final RMSNorm and the LM head). One builder (decoder_model.h) reads this
// description; nothing after the frontend knows which family a graph is.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln::frontend {

// Which config field decides whether a group of linears carries a bias.
enum class BiasRule {
  Always,        // Qwen2's q/k/v
  Never,         // Qwen2's o_proj and MLP
  UnlessNoBias,  // Qwen v1: present when no_bias is false
  AttentionBias, // Llama and Qwen3: attention_bias
  MlpBias,       // Llama: mlp_bias
};

struct DecoderFamily {
  std::string_view architecture; // config.json's "architectures" entry
  std::string_view name;         // the graph's name: "qwen", "qwen2", "llama", "qwen3"
  // Scopes: node and tensor names are "<model>.<layers>.<i>.<attention>.<q>"
  // and so on, the module paths of the Hugging Face implementation.
  std::string_view model;     // "transformer" / "model"
  std::string_view layers;    // "h" / "layers"
  std::string_view embedding; // "wte" / "embed_tokens"
  std::string_view input_norm, post_attention_norm, final_norm;
  std::string_view attention; // "attn" / "self_attn"
  // Qwen v1 projects q, k and v with one linear (fused_qkv, named qkv);
  // the others with three (q, k, v).
  bool fused_qkv;
  std::string_view qkv, q, k, v, o;
  // Qwen3: an RMSNorm over each head's channels of q and k before the
  // rotary embedding; empty where the family has none.
  std::string_view q_norm, k_norm;
  std::string_view mlp;
  // down(up(x) * silu(gate(x))); Qwen v1 calls them c_proj, w1 and w2.
  std::string_view gate, up, down;
  BiasRule qkv_bias, o_bias, mlp_bias;
  // Qwen v1 writes intermediate_size as twice the MLP width.
  bool intermediate_is_twice_mlp;
  // Qwen v1 initialises the layers' c_proj weights as GPT-2 does, with the
  // standard deviation divided by sqrt(2 * layers); the others all alike.
  bool scaled_output_init;
  // The LoRA targets of the family's own recipe (Qwen's finetune.py for Qwen
  // v1; PEFT's default q_proj and v_proj for the others).
  std::vector<std::string> default_lora_targets;

  // The prefix of layer i's names: "transformer.h.3." / "model.layers.3.".
  std::string layerPrefix(int64_t i) const;
  std::string embeddingWeight() const; // "model.embed_tokens.weight"
  std::string finalNormWeight() const; // "model.norm.weight"
};

// Every family kiln builds, Qwen v1 first.
const std::vector<DecoderFamily> &decoderFamilies();

// The family of `architecture`, or null.
const DecoderFamily *findDecoderFamily(std::string_view architecture);

// "QWenLMHeadModel, Qwen2ForCausalLM, ...", for errors.
std::string supportedArchitectures();

} // namespace kiln::frontend
