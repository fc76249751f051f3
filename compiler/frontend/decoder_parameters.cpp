// The parameter lists of every decoder family, from its family description.
#include "compiler/frontend/decoder_parameters.h"

namespace kiln::frontend {

namespace {

// One linear layer of a decoder layer, as LoRA and the parameter list see it.
struct LinearSpec {
  std::string module; // under the layer prefix: "self_attn.q_proj"
  int64_t out, in;
  TensorSplit split; // the weight's
  bool bias;
};

std::vector<LinearSpec> layerLinears(const DecoderConfig &config) {
  const DecoderFamily &f = *config.family;
  const int64_t H = config.hidden_size, F = config.mlpWidth();
  const int64_t A = config.num_attention_heads * config.headDim();
  const int64_t KV = config.kvHeads() * config.headDim();
  // The key/value projections' rows are whole heads: more ranks than
  // heads replicate each over the ranks that share it.
  const TensorSplit rows{0}, columns{1}, qkv_rows{0, 3}, kv_rows{0, 1, 0, config.kvHeads()};
  const std::string attn = std::string(f.attention) + ".", mlp = std::string(f.mlp) + ".";
  const bool qkv_bias = config.hasBias(f.qkv_bias), mlp_bias = config.hasBias(f.mlp_bias);
  std::vector<LinearSpec> out;
  if (f.fused_qkv) {
    out.push_back({attn + std::string(f.qkv), 3 * A, H, qkv_rows, qkv_bias});
  } else {
    out.push_back({attn + std::string(f.q), A, H, rows, qkv_bias});
    out.push_back({attn + std::string(f.k), KV, H, kv_rows, qkv_bias});
    out.push_back({attn + std::string(f.v), KV, H, kv_rows, qkv_bias});
  }
  out.push_back({attn + std::string(f.o), H, A, columns, config.hasBias(f.o_bias)});
  out.push_back({mlp + std::string(f.up), F, H, rows, mlp_bias});
  out.push_back({mlp + std::string(f.gate), F, H, rows, mlp_bias});
  out.push_back({mlp + std::string(f.down), H, F, columns, mlp_bias});
  return out;
}

// PEFT's "all-linear": every linear of every layer (not the output layer).
bool allLinear(const LoraConfig &lora) {
  return lora.targets.size() == 1 && lora.targets.front() == "all-linear";
}

std::string linearNames(const DecoderConfig &config) {
  std::string out;
  for (const LinearSpec &l : layerLinears(config))
    out += (out.empty() ? "" : ", ") + l.module;
  return out;
}

} // namespace

std::vector<ParamSpec> decoderParameters(const DecoderConfig &config) {
  const DecoderFamily &f = *config.family;
  const int64_t H = config.hidden_size, V = config.vocab_size;
  // The vocabulary rows, padded when the ranks do not divide them.
  const TensorSplit replicated, rows{0, 1, V};
  std::vector<ParamSpec> params;
  params.push_back({f.embeddingWeight(), {V, H}, ParamKind::Embedding, rows});
  const std::vector<LinearSpec> linears = layerLinears(config);
  // The post-attention norm precedes the MLP's first linear; Qwen3's q and k
  // norms follow v_proj.
  const std::string first_mlp = std::string(f.mlp) + "." + std::string(f.up);
  const std::string v_proj = std::string(f.attention) + "." + std::string(f.v);
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    const std::string p = f.layerPrefix(i);
    auto norm = [&](std::string_view module, int64_t size) {
      params.push_back({p + std::string(module) + ".weight", {size}, ParamKind::Norm, replicated});
    };
    norm(f.input_norm, H);
    for (const LinearSpec &l : linears) {
      if (l.module == first_mlp)
        norm(f.post_attention_norm, H);
      params.push_back({p + l.module + ".weight", {l.out, l.in}, ParamKind::Weight, l.split});
      // A column-parallel layer's bias splits with its rows; a row-parallel
      // one's is added once after the sum, whole on every rank.
      if (l.bias)
        params.push_back({p + l.module + ".bias",
                          {l.out},
                          ParamKind::Bias,
                          l.split.axis == 0 ? l.split : replicated});
      if (!f.q_norm.empty() && l.module == v_proj) {
        norm(std::string(f.attention) + "." + std::string(f.q_norm), config.headDim());
        norm(std::string(f.attention) + "." + std::string(f.k_norm), config.headDim());
      }
    }
  }
  params.push_back({f.finalNormWeight(), {H}, ParamKind::Norm, replicated});
  if (!config.tie_word_embeddings)
    params.push_back({"lm_head.weight", {V, H}, ParamKind::Weight, rows});
  return params;
}

LoraConfig withDefaultTargets(const DecoderConfig &config, LoraConfig lora) {
  if (lora.targets.empty())
    lora.targets = config.family->default_lora_targets;
  return lora;
}

Expected<std::vector<ParamSpec>> loraParameters(const DecoderConfig &config,
                                                const LoraConfig &requested) {
  KILN_RETURN_IF_ERROR(validateLoraConfig(requested, "LoRA"));
  const LoraConfig lora = withDefaultTargets(config, requested);
  const DecoderFamily &f = *config.family;
  const int64_t r = lora.rank;
  const TensorSplit replicated, columns{1};
  const std::vector<LinearSpec> linears = layerLinears(config);
  const bool all = allLinear(lora);
  for (const std::string &t : lora.targets) {
    if (all)
      break;
    LoraConfig one = lora;
    one.targets = {t};
    bool found = false;
    for (int64_t i = 0; i < config.num_hidden_layers && !found; ++i)
      for (const LinearSpec &l : linears)
        found = found || isLoraTarget(one, f.layerPrefix(i) + l.module);
    if (!found)
      return Error("LoRA target '" + t + "' matches no linear layer of the " +
                   std::string(f.architecture) + " model; its linears are " + linearNames(config) +
                   " (or all-linear; lm_head takes no adapter)");
  }
  std::vector<ParamSpec> params;
  for (int64_t i = 0; i < config.num_hidden_layers; ++i)
    for (const LinearSpec &l : linears) {
      const std::string module = f.layerPrefix(i) + l.module;
      if (!all && !isLoraTarget(lora, module))
        continue;
      const bool row_parallel = l.split == columns;
      params.push_back(
          {loraAName(module), {r, l.in}, ParamKind::LoraA, row_parallel ? columns : replicated});
      params.push_back(
          {loraBName(module), {l.out, r}, ParamKind::LoraB, row_parallel ? replicated : l.split});
    }
  return params;
}

} // namespace kiln::frontend
