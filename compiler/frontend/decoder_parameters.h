// A decoder's parameters: their Hugging Face names, shapes, kinds and how
// tensor parallelism splits them, for the model and for its LoRA adapters.
#pragma once

#include <string>
#include <vector>

#include "compiler/frontend/decoder_config.h"
#include "compiler/frontend/lora_config.h"
#include "ir/shape.h"
#include "ir/tensor_split.h"
#include "support/error.h"

namespace kiln::frontend {

// What a parameter is, which decides its initialisation.
enum class ParamKind { Embedding, Weight, Norm, Bias, LoraA, LoraB };

struct ParamSpec {
  std::string name; // the Hugging Face state-dict name
  Shape shape;      // PyTorch layout: [out, in] for linear weights
  ParamKind kind;
  // How tensor parallelism splits it: the q/k/v projections (Qwen v1's
  // c_attn by q, k and v each) and the MLP's up and gate column-parallel (by
  // rows), the attention output and MLP down projections row-parallel (by
  // columns), the embedding and lm_head by vocabulary rows (Megatron's
  // vocab-parallel layers, padded when the ranks do not divide the
  // vocabulary), the norms and the row-parallel biases replicated. The key
  // and value projections split by whole heads, each replicated over the
  // ranks that share it when there are fewer heads than ranks.
  TensorSplit split;
};

// Every parameter of the model in Hugging Face order (the embedding, the
// layers, the final norm, lm_head unless tied). Which linears carry a bias
// is the family's rule (Qwen v1: c_attn always, the others unless no_bias;
// Qwen2: q, k and v; Llama: attention_bias and mlp_bias).
std::vector<ParamSpec> decoderParameters(const DecoderConfig &config);

// `lora` with its targets, when it names none, the family's default ones.
LoraConfig withDefaultTargets(const DecoderConfig &config, LoraConfig lora);

// The LoRA adapters of every linear layer `lora` targets, in model order (A
// then B of each; PEFT's names). Tensor parallelism splits them with their
// base weight: a column-parallel layer's B by rows as its weight, a
// row-parallel layer's A by columns, the other factor replicated. A target
// that matches no linear layer is an error (lm_head is not adaptable).
// "all-linear" (PEFT's) targets every linear of every layer.
Expected<std::vector<ParamSpec>> loraParameters(const DecoderConfig &config,
                                                const LoraConfig &lora);

// A weights file of another family (its embedding named as that family
// names it, the model's own missing) is an error naming `source`, both
// families and the names; anything else is left to the binding's checks.
template <class TensorMap>
Status checkWeightsFamily(const DecoderConfig &config, const TensorMap &weights,
                          const std::string &source) {
  if (weights.count(config.family->embeddingWeight()))
    return Status::ok();
  for (const DecoderFamily &other : decoderFamilies())
    if (&other != config.family && weights.count(other.embeddingWeight()))
      return Error(source + ": a checkpoint of " + std::string(other.architecture) +
                   " (it holds '" + other.embeddingWeight() + "'), but the model is " +
                   std::string(config.family->architecture) + ", whose embedding is '" +
                   config.family->embeddingWeight() + "'");
  return Status::ok();
}

} // namespace kiln::frontend
