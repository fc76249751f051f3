// What `kiln init` writes: a loaded model's initial weights by name. An
// ONNX model's are its initializers; a Hugging Face config's are initialised
// as the family does (decoder_init.h); a graph JSON's parameters are normal
// (0, std_dev). Then each scale multiplies the weights matching its glob.
// Weights larger than the machine's memory are an error saying how large.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compiler/frontend/model_loader.h"
#include "ir/tensor.h"
#include "support/error.h"

namespace kiln::frontend {

struct WeightScale {
  std::string pattern; // fnmatch glob over the weights' names
  double factor = 1;
};

// `source` names the model in errors.
Expected<std::map<std::string, Tensor>> initialWeights(const LoadedModel &model,
                                                       const std::string &source, uint64_t seed,
                                                       double std_dev,
                                                       const std::vector<WeightScale> &scales);

// The bytes of a graph's parameters in f32 (saturating).
int64_t parameterBytes(const Graph &graph);

} // namespace kiln::frontend
