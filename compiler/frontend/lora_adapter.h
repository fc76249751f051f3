// PEFT's adapter folder: adapter_config.json (lora_config.h) and
// adapter_model.safetensors with the A and B of every adapted linear under
// PEFT's names ("base_model.model.transformer.h.0.attn.c_attn.lora_A.weight").
// `kiln train` writes one beside every checkpoint of a LoRA run, `--lora DIR`
// starts from one, and `kiln merge` folds one into the base weights.
#pragma once

#include <map>
#include <string>

#include "compiler/frontend/decoder_config.h"
#include "compiler/frontend/lora_config.h"
#include "ir/tensor.h"
#include "support/error.h"

namespace kiln::frontend {

inline constexpr const char *kAdapterConfigFile = "adapter_config.json";
inline constexpr const char *kAdapterWeightsFile = "adapter_model.safetensors";

struct LoraAdapter {
  LoraConfig config;
  std::map<std::string, Tensor> tensors; // by PEFT name
};

// Reads folder `dir`; errors name the file. The tensors are checked against
// the model only where they are used (loraParameters gives the expected set).
Expected<LoraAdapter> readLoraAdapter(const std::string &dir);

// Writes both files into `dir` (created when missing), each atomically.
Status writeLoraAdapter(const std::string &dir, const LoraAdapter &adapter);

// Checks `adapter` holds exactly the A and B of every linear its config
// targets in `config`'s model, with their shapes; errors name `source`.
Status checkLoraAdapter(const DecoderConfig &config, const LoraAdapter &adapter,
                        const std::string &source);

// The adapters a run starts from: those of folder `dir` (checked against the
// model, and refused when a tensor holds NaN or inf), or with `dir` empty
// fresh ones for `fresh` (initLoraWeights, seeded by `seed`).
Expected<LoraAdapter> startingAdapter(const DecoderConfig &config, const std::string &dir,
                                      const LoraConfig &fresh, uint64_t seed);

// The base weights with every adapted linear's weight replaced by
//   W + (alpha / r) * B A
// summed in double (B A by a double GEMM), stored in W's dtype (through f32).
// The result holds the model's parameters only, the others unchanged; what
// else `base` holds (a kiln checkpoint's moments) is left out, and a
// missing parameter is an error naming `weights_source`.
Expected<std::map<std::string, Tensor>> mergeLoraAdapter(const DecoderConfig &config,
                                                         std::map<std::string, Tensor> base,
                                                         const LoraAdapter &adapter,
                                                         const std::string &weights_source);

} // namespace kiln::frontend
