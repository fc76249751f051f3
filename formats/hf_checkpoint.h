// Hugging Face checkpoints as they ship: one `model.safetensors`, or shards
// named by `model.safetensors.index.json`
//   {"metadata": {"total_size": <bytes>},
//    "weight_map": {"<tensor name>": "model-00001-of-00003.safetensors", ...}}
// (shards in the index's folder), or the model folder holding either. The
// same layout is written back, so `transformers` loads what kiln writes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "support/error.h"

namespace kiln {

inline constexpr const char *kHfWeightsFile = "model.safetensors";
inline constexpr const char *kHfWeightsIndex = "model.safetensors.index.json";

// The tensors of `path`: a safetensors file, an index (every shard it names
// read, each with pread into its tensors), or a folder holding an index
// or model.safetensors. Errors name the file: a missing shard, a tensor the
// index lists but its shard lacks, a tensor in two shards, a shard name
// that leaves the folder.
// `check`, when given, sees each file's tensors as that file is read (a
// shard at a time) and may refuse them: refuseNonFinite (finite_values.h)
// names the shard that holds a NaN.
using TensorFileCheck =
    std::function<Status(const std::string &file, const std::map<std::string, Tensor> &tensors)>;
Expected<std::map<std::string, Tensor>> readHfWeights(const std::string &path,
                                                      const TensorFileCheck &check = {});

// Writes `tensors` into folder `dir` (created when missing): one
// model.safetensors when they fit in `max_shard_bytes`, else
// model-0000K-of-0000N.safetensors shards of at most that size (a larger
// tensor alone in its shard) plus the index, tensors in name order. Each
// file is written atomically; returns the files written.
Expected<std::vector<std::string>> writeHfWeights(const std::string &dir,
                                                  const std::map<std::string, Tensor> &tensors,
                                                  uint64_t max_shard_bytes);

// One line for the tensors of `source` that a model does not take (the
// optimizer state of a kiln checkpoint), however many: how many, and the
// first of them. `names` is not empty.
std::string unusedTensorsNote(const std::string &source, const std::vector<std::string> &names);

} // namespace kiln
