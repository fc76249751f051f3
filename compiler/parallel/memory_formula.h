// The literature's per-device memory for a training layout, to set beside
// kiln's plan: model states as ZeRO counts them (Rajbhandari et al. 2019),
// activations as Korthikanti et al. 2022 (table 2) count them for a GPT
// layer. Both assume what Megatron does: tensor parallelism splits every
// parameter, the vocabulary included; kiln's plan says where it differs.
#pragma once

#include <cstdint>
#include <string>

#include "compiler/frontend/decoder_config.h"
#include "compiler/frontend/lora_config.h"
#include "compiler/parallel/parallel_config.h"
#include "ir/dtype.h"
#include "passes/memory/recompute_settings.h"

namespace kiln::parallel {

struct MemoryFormula {
  int64_t model_states = 0; // weights, gradients, optimizer state (and master weights)
  int64_t activations = 0;  // of the transformer layers, kept for the backward
  int64_t total() const { return model_states + activations; }
  std::string toText() const; // "model states 1.0 GiB + activations 2.0 GiB = 3.0 GiB"
};

// For Ψ parameters split t ways over tensor parallelism and N data-parallel
// replicas: with 16-bit weights 2 bytes of weight, 2 of gradient and 12 of
// f32 master weight, m and v per parameter (16Ψ/t; ZeRO-1: 4Ψ/t + 12Ψ/(tN),
// Ψ/t counting a padded vocabulary's rows and replicated key/value heads);
// with f32 weights 4 + 4 + 8 (no master); ZeRO-2 also shards the gradient
// (2 + 14/N), ZeRO-3 the weight too (16/N). With LoRA the base is 2 (or 4)
// bytes per parameter and only the adapters count the rest. Activations per
// layer: the paper's sbh(34 + 5as/h) bytes at 16 bits, sbh(10 + 24/t +
// 5as/(ht)) with tensor parallelism (sequence s, micro-batch b, hidden h,
// heads a), for the layer kiln builds: its norms compute in f32 and keep
// their normalised output, and it has no dropout, so the 10 outside the
// tensor-parallel regions is 16 (memory_formula.cpp says how); with
// grouped-query attention K and V (4 of the 24) shrink by kv_heads / a, so
// 24 becomes 20 + 4 kv_heads / a (with fewer kv_heads than t, each rank
// holds one replicated head: 24/t becomes 20/t + 4/a); with sequence
// parallelism the 16 is split too, sbh(40 + 5as/h)/t, and full
// recomputation keeps 2sbh/t;
// selective recomputation drops the 5as/(ht) term, full recomputation keeps
// only the layer's input, 2sbh; twice that in f32. The embedding, the logits
// and the loss are not counted. P pipeline stages divide the model states
// by P and leave the first stage's activations as they are (it holds P
// micro-batches of L/P layers); interleaved over V model stages a device,
// it holds L(1 + (P - 1)/(PV)) layers' worth once M > P. With fused
// attention (FlashAttentionScore) the 5as/(ht) term goes as with selective recomputation, and the
// kernel's row statistics stay: 8 bytes a query row of each of a/t heads, 8as/t.
MemoryFormula memoryFormula(const frontend::DecoderConfig &config, const frontend::LoraConfig &lora,
                            const ParallelConfig &layout, int64_t micro_batch, int64_t seq,
                            DType dtype,
                            passes::RecomputeMode recompute = passes::RecomputeMode::None,
                            bool fused_attention = false);

} // namespace kiln::parallel
