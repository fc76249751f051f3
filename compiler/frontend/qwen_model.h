// The Qwen (QWenLMHeadModel) forward graph with its loss, as modeling_qwen.py computes it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compiler/frontend/lora_config.h"
#include "compiler/frontend/qwen_config.h"
#include "ir/dtype.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ir/tensor_split.h"
#include "ops/op_registry.h"

namespace kiln::frontend {

struct ModelOptions {
  int64_t batch = 1;
  int64_t seq = 0; // 0: the config's seq_length
  DType dtype = DType::F32;
  // Tensor-parallel ranks: > 1 builds one rank's shard of the model
  // (Megatron: heads and MLP width split, collectives between the layers).
  int tensor_parallel = 1;
  // With a rank: LoRA adapters on the targeted linears, the base weights
  // frozen (lora_config.h).
  LoraConfig lora;
  // The ops a graph file may use beyond the built-in ones: the job's custom
  // ops (null: none). The loaded graph is written in them (Graph::vocabulary).
  std::shared_ptr<const ops::OpRegistry> ops;
};

// What a parameter is, which decides its initialisation.
enum class ParamKind { Embedding, Weight, Norm, Bias, LoraA, LoraB };

struct ParamSpec {
  std::string name; // the Hugging Face state-dict name
  Shape shape;      // PyTorch layout: [out, in] for linear weights
  ParamKind kind;
  // How tensor parallelism splits it: c_attn, w1 and w2 column-parallel (by
  // rows, c_attn's q, k and v each), the c_projs row-parallel (by columns),
  // wte and lm_head by vocabulary rows (Megatron's vocab-parallel layers),
  // the norms and c_proj biases replicated.
  TensorSplit split;
};

// With LoRA dropout, the step's input holding the dropout seed (i64 scalar,
// Hyperparameter): the trainer feeds a new one every step.
inline constexpr const char *kLoraDropoutSeedName = "lora.dropout_seed";

// With tensor parallelism, the step's input holding the rank within its
// group (i64 scalar, Hyperparameter): the vocab-parallel embedding and loss
// find their shard of the vocabulary by it.
inline constexpr const char *kTensorParallelRankName = "tensor_parallel.rank";

// Every parameter of the model in Hugging Face order (wte, the layers, ln_f,
// lm_head unless tied). Biases of attn.c_proj and the MLP exist only when
// no_bias is false; c_attn always has one.
std::vector<ParamSpec> qwenParameters(const QwenConfig &config);

// The LoRA adapters of every linear layer `lora` targets, in model order (A
// then B of each; PEFT's names). Tensor parallelism splits them with their
// base weight: a column-parallel layer's B by rows as its weight, a
// row-parallel layer's A by columns, the other factor replicated. A target
// that matches no linear layer is an error (lm_head is not adaptable).
Expected<std::vector<ParamSpec>> loraParameters(const QwenConfig &config, const LoraConfig &lora);

// Inputs: "input_ids" and "labels" (i64 [B,S], data), then every parameter of
// qwenParameters() in options.dtype (with tensor_parallel > 1, each rank's
// piece of it; a TensorParallelCopy feeds every column-parallel layer and a
// TensorParallelReduce follows every row-parallel one; the embedding is a
// masked Gather of the rank's vocabulary rows summed over the ranks, and the
// loss reduces the row max and sum over the ranks without gathering the
// logits, the rank read from kTensorParallelRankName). With LoRA the base
// weights are Frozen inputs and the adapters f32 Parameters (their master
// copy), cast to options.dtype where used; with LoRA dropout, each adapted
// linear's adapter input goes through its own Dropout (stream: the linear's
// number in the model), seeded by the input kLoraDropoutSeedName. Outputs:
// "logits" (f32 [B,S,V], each rank's V/t columns under tensor parallelism) and
// "loss" (f32 [], next-token cross entropy). Node names are the Hugging Face
// module paths ("transformer.h.3.attn.softmax"). Builds types only; no tensor
// is allocated.
Expected<Graph> buildQwenForward(const QwenConfig &config, const ModelOptions &options);

} // namespace kiln::frontend
