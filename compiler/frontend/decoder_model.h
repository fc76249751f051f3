// The forward graph with its loss of every decoder family kiln builds
// (decoder_family.h), as the families' Hugging Face modeling files compute it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/frontend/decoder_config.h"
#include "compiler/frontend/decoder_parameters.h"
#include "compiler/frontend/lora_config.h"
#include "ir/dtype.h"
#include "ir/graph.h"
#include "ir/tensor_split.h"
#include "ops/op_registry.h"
#include "support/error.h"

namespace kiln::frontend {

struct ModelOptions {
  int64_t batch = 1;
  int64_t seq = 0; // 0: the config's seq_length
  DType dtype = DType::F32;
  // Tensor-parallel ranks: > 1 builds one rank's shard of the model
  // (Megatron: heads and MLP width split, collectives between the layers).
  int tensor_parallel = 1;
  // With tensor_parallel > 1: Megatron's sequence parallelism. The residual
  // stream, the norms and the residual adds hold each rank's 1/t of the
  // sequence ([B, S/t, H]); a TensorParallelAllGather (along the sequence)
  // takes the place of each TensorParallelCopy before a column-parallel
  // layer and a TensorParallelReduceScatter that of each TensorParallelReduce
  // after a row-parallel one (and after the embedding); the replicated
  // weights the slices meet (norms, row-parallel biases) go through a
  // TensorParallelCopy, whose backward sums their partial gradients. The
  // sequence must divide by t.
  bool sequence_parallel = false;
  // With a rank: LoRA adapters on the targeted linears, the base weights
  // frozen (lora_config.h).
  LoraConfig lora;
  // The ops a graph file may use beyond the built-in ones: the job's custom
  // ops (null: none). The loaded graph is written in them (Graph::vocabulary).
  std::shared_ptr<const ops::OpRegistry> ops;
  // An ONNX model's graph inputs' shapes by name (--input-shape): they bind
  // its symbolic dimensions (batch and seq above bind those named so).
  std::map<std::string, std::vector<int64_t>> input_shapes;
};

// With LoRA dropout, the step's input holding the dropout seed (i64 scalar,
// Hyperparameter): the trainer feeds a new one every step.
inline constexpr const char *kLoraDropoutSeedName = "lora.dropout_seed";

// With tensor parallelism, the step's input holding the rank within its
// group (i64 scalar, Hyperparameter): the vocab-parallel embedding and loss
// find their shard of the vocabulary by it.
inline constexpr const char *kTensorParallelRankName = "tensor_parallel.rank";

// Inputs: "input_ids" and "labels" (i64 [B,S], data), then every parameter of
// decoderParameters() in options.dtype (with tensor_parallel > 1, each rank's
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
// module paths ("transformer.h.3.attn.softmax", "model.layers.3.self_attn.
// softmax"). Builds types only; no tensor is allocated.
Expected<Graph> buildDecoderForward(const DecoderConfig &config, const ModelOptions &options);

} // namespace kiln::frontend
