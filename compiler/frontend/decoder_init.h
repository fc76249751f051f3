// Fresh decoder weights initialised as the family's _init_weights does
// (QWenPreTrainedModel, Qwen2PreTrainedModel, LlamaPreTrainedModel, ...).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "compiler/frontend/decoder_config.h"
#include "compiler/frontend/lora_config.h"
#include "ir/tensor.h"
#include "support/error.h"

namespace kiln::frontend {

// One f32 tensor per parameter of decoderParameters(), by Hugging Face name:
// embeddings and linear weights normal(0, initializer_range) (Qwen v1's
// "c_proj.weight"s normal(0, initializer_range / sqrt(2 * num_hidden_layers))),
// RMSNorm weights 1, biases 0. Each tensor draws from its own generator seeded
// by `seed` and its name, so adding or removing a parameter leaves the others
// unchanged.
std::map<std::string, Tensor> initDecoderWeights(const DecoderConfig &config, uint64_t seed);

// Fresh LoRA adapters for the linears `lora` targets, as PEFT initialises
// them: A Kaiming-uniform (U(-1/sqrt(in), 1/sqrt(in))), B zero, so training
// starts from the base model's outputs. f32, seeded per tensor as above.
Expected<std::map<std::string, Tensor>> initLoraWeights(const DecoderConfig &config,
                                                        const LoraConfig &lora, uint64_t seed);

// Multiplies every tensor whose name matches the glob `pattern` (fnmatch:
// "transformer.h.*.attn.c_attn.weight") by `factor`, for experiments such as
// provoking fp16 overflow; an error when nothing matches.
Status scaleWeights(std::map<std::string, Tensor> &weights, const std::string &pattern,
                    double factor);

} // namespace kiln::frontend
