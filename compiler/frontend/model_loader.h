// Loads the MODEL argument: a Hugging Face config.json (or a folder holding
// one), built into the Qwen forward graph, a kiln graph JSON file, or an
// ONNX model (a .onnx file, frontend/onnx/).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "compiler/frontend/decoder_config.h"
#include "compiler/frontend/decoder_model.h"
#include "ir/graph.h"
#include "ops/interpreter.h"
#include "support/error.h"

namespace kiln::frontend {

struct LoadedModel {
  Graph graph;
  std::optional<DecoderConfig> config; // set for Hugging Face configs only
  // How tensor parallelism splits each parameter (Hugging Face configs only).
  std::map<std::string, TensorSplit> splits;
  // The weights the model file holds itself (an ONNX model's initializers and
  // constants), by graph input name; a weights file given too overrides them.
  ops::TensorMap weights;
  bool onnx = false; // read from an ONNX model: every graph output is the model's
};

// `path` is a directory holding config.json, a config.json file, or a graph
// JSON ({"format": "kiln.graph", ...}), which is verified against the op
// definitions, or an ONNX model (a path ending in .onnx; options' batch, seq
// and input_shapes bind its symbolic dimensions); `options` applies to configs only (a graph cannot
// be split for tensor parallelism). Errors name the path.
Expected<LoadedModel> loadModel(const std::string &path, const ModelOptions &options);

// The file loadModel reads for `path`: `path` itself, or the config.json of
// the folder it names. Errors as loadModel's.
Expected<std::string> modelFile(const std::string &path);

} // namespace kiln::frontend
