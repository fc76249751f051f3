// LoRA (Hu et al. 2021) as PEFT defines it: which linear layers get
// adapters, their rank and scale, and PEFT's names for them. For a targeted
// nn.Linear (weight W [out, in], bias b)
//   y = x W^T + b + (alpha / r) * dropout(x) A^T B^T,  A [r, in], B [out, r],
// with W and b frozen and only A and B trained.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/error.h"

namespace kiln::frontend {

struct LoraConfig {
  int64_t rank = 0; // 0: no LoRA, every weight trained
  double alpha = 16;
  double dropout = 0;
  // Module names matched as PEFT does; empty: the model family's own recipe
  // (DecoderFamily::default_lora_targets), resolved once the model is known.
  std::vector<std::string> targets;
  std::string base_model; // adapter_config.json's base_model_name_or_path

  bool enabled() const { return rank > 0; }
  double scale() const { return alpha / static_cast<double>(rank); }
  // "r 64, alpha 16, dropout 0.05, targets c_attn, c_proj, w1, w2": what a
  // checkpoint records, so a resumed run must train the same adapters.
  std::string toString() const;
};

inline constexpr int64_t kMaxLoraRank = 65536;

// Rank in [1, kMaxLoraRank], alpha finite and positive, dropout in [0, 1),
// at least one target, each a non-empty module name. Errors name `source`.
Status validateLoraConfig(const LoraConfig &config, std::string_view source);

// PEFT's suffix matching: `module` ("transformer.h.0.mlp.c_proj") is
// targeted when a target equals it or is a dotted suffix of it ("c_proj",
// "mlp.c_proj").
bool isLoraTarget(const LoraConfig &config, std::string_view module);

// What PEFT puts before a module's path in an adapter's tensor names.
inline constexpr std::string_view kPeftPrefix = "base_model.model.";

// The names PEFT saves the adapters of `module` under:
// "base_model.model.<module>.lora_A.weight" and "...lora_B.weight".
std::string loraAName(std::string_view module);
std::string loraBName(std::string_view module);

// adapter_config.json: PEFT's fields (peft_type LORA, r, lora_alpha,
// lora_dropout, target_modules, bias none, task_type CAUSAL_LM,
// base_model_name_or_path, fan_in_fan_out false).
nlohmann::json adapterConfigJson(const LoraConfig &config);
// Reads those fields back; a bias other than "none", a peft_type other than
// LORA or fan_in_fan_out true (which kiln does not implement) is an error
// naming `source`.
Expected<LoraConfig> parseAdapterConfig(const nlohmann::json &doc, std::string_view source);

} // namespace kiln::frontend
