// The families kiln builds, each written from its Hugging Face modeling file
// (modeling_qwen.py, modeling_qwen2.py, modeling_llama.py, modeling_qwen3.py).
#include "compiler/frontend/decoder_family.h"

namespace kiln::frontend {

std::string DecoderFamily::layerPrefix(int64_t i) const {
  return std::string(model) + "." + std::string(layers) + "." + std::to_string(i) + ".";
}

std::string DecoderFamily::embeddingWeight() const {
  return std::string(model) + "." + std::string(embedding) + ".weight";
}

std::string DecoderFamily::finalNormWeight() const {
  return std::string(model) + "." + std::string(final_norm) + ".weight";
}

namespace {

// Qwen2, Llama and Qwen3 share Llama's module names.
DecoderFamily llamaNamed(std::string_view architecture, std::string_view name, BiasRule qkv_bias,
                         BiasRule o_bias, BiasRule mlp_bias, bool qk_norm) {
  return DecoderFamily{
      .architecture = architecture,
      .name = name,
      .model = "model",
      .layers = "layers",
      .embedding = "embed_tokens",
      .input_norm = "input_layernorm",
      .post_attention_norm = "post_attention_layernorm",
      .final_norm = "norm",
      .attention = "self_attn",
      .fused_qkv = false,
      .qkv = "",
      .q = "q_proj",
      .k = "k_proj",
      .v = "v_proj",
      .o = "o_proj",
      .q_norm = qk_norm ? "q_norm" : "",
      .k_norm = qk_norm ? "k_norm" : "",
      .mlp = "mlp",
      .gate = "gate_proj",
      .up = "up_proj",
      .down = "down_proj",
      .qkv_bias = qkv_bias,
      .o_bias = o_bias,
      .mlp_bias = mlp_bias,
      .intermediate_is_twice_mlp = false,
      .scaled_output_init = false,
      .default_lora_targets = {"q_proj", "v_proj"},
  };
}

} // namespace

const std::vector<DecoderFamily> &decoderFamilies() {
  static const std::vector<DecoderFamily> families = {
      DecoderFamily{
          .architecture = "QWenLMHeadModel",
          .name = "qwen",
          .model = "transformer",
          .layers = "h",
          .embedding = "wte",
          .input_norm = "ln_1",
          .post_attention_norm = "ln_2",
          .final_norm = "ln_f",
          .attention = "attn",
          .fused_qkv = true,
          .qkv = "c_attn",
          .q = "",
          .k = "",
          .v = "",
          .o = "c_proj",
          .q_norm = "",
          .k_norm = "",
          .mlp = "mlp",
          .gate = "w2",
          .up = "w1",
          .down = "c_proj",
          .qkv_bias = BiasRule::Always,
          .o_bias = BiasRule::UnlessNoBias,
          .mlp_bias = BiasRule::UnlessNoBias,
          .intermediate_is_twice_mlp = true,
          .scaled_output_init = true,
          .default_lora_targets = {"c_attn", "c_proj", "w1", "w2"},
      },
      llamaNamed("Qwen2ForCausalLM", "qwen2", BiasRule::Always, BiasRule::Never, BiasRule::Never,
                 false),
      llamaNamed("LlamaForCausalLM", "llama", BiasRule::AttentionBias, BiasRule::AttentionBias,
                 BiasRule::MlpBias, false),
      llamaNamed("Qwen3ForCausalLM", "qwen3", BiasRule::AttentionBias, BiasRule::AttentionBias,
                 BiasRule::Never, true),
  };
  return families;
}

const DecoderFamily *findDecoderFamily(std::string_view architecture) {
  for (const DecoderFamily &f : decoderFamilies())
    if (f.architecture == architecture)
      return &f;
  return nullptr;
}

std::string supportedArchitectures() {
  std::string out;
  for (const DecoderFamily &f : decoderFamilies())
    out += (out.empty() ? "" : ", ") + std::string(f.architecture);
  return out;
}

} // namespace kiln::frontend
