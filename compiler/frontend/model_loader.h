// Loads the MODEL argument: a Hugging Face config.json (or a folder holding
// one), built into the Qwen forward graph, or a kiln graph JSON file.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "compiler/frontend/decoder_config.h"
#include "compiler/frontend/decoder_model.h"
#include "ir/error.h"
#include "ir/graph.h"

namespace kiln::frontend {

struct LoadedModel {
  Graph graph;
  std::optional<DecoderConfig> config; // set for Hugging Face configs only
  // How tensor parallelism splits each parameter (Hugging Face configs only).
  std::map<std::string, TensorSplit> splits;
};

// `path` is a directory holding config.json, a config.json file, or a graph
// JSON ({"format": "kiln.graph", ...}), which is verified against the op
// definitions; `options` applies to configs only (a graph cannot be split
// for tensor parallelism). Errors name the path.
Expected<LoadedModel> loadModel(const std::string &path, const ModelOptions &options);

// The file loadModel reads for `path`: `path` itself, or the config.json of
// the folder it names. Errors as loadModel's.
Expected<std::string> modelFile(const std::string &path);

} // namespace kiln::frontend
