// What `kiln merge` runs: a PEFT LoRA adapter folded into its base weights
// (W + alpha/r * B A, in the base dtype) and written as a Hugging Face model
// folder: the shards and their index, then the base model's config.json,
// last and atomically, so a folder holding one holds the whole merge even
// if the merge was killed. Nothing is written from a tensor that is not
// finite, and never into the base model's own folder.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/frontend/decoder_config.h"
#include "support/error.h"

namespace kiln::session {

struct MergeRequest {
  frontend::DecoderConfig config; // the base model's
  std::string config_path;        // its config.json, copied beside the weights
  std::string weights;            // a safetensors file, a sharded index or a model folder
  std::string adapter;            // the PEFT adapter folder
  std::string output;             // the model folder to write
  int64_t shard_bytes = 0;        // the largest shard
};

struct MergeSummary {
  size_t adapted_layers = 0;
  std::string adapter; // its settings, "r 8, alpha 16, ..."
  size_t tensors = 0;  // written
  size_t files = 0;    // shards and index
  // Tensors of the base file the model does not have (a kiln checkpoint's
  // optimizer state), left out.
  std::vector<std::string> unused;
};

Expected<MergeSummary> mergeAdapter(const MergeRequest &request);

} // namespace kiln::session
