// The ONNX frontend: an ONNX model (opsets 7-18 of the default domain)
// lowered onto kiln's ops. Symbolic dimensions are bound from the options;
// shape arithmetic (Shape, Gather, Concat, Unsqueeze, Range,
// ConstantOfShape feeding Reshape or Expand) is folded while importing, so
// the graph kiln compiles has static shapes. Float initializers become
// Parameter inputs (the model's weights), other initializers and constants
// that are not folded away Frozen ones; LoadedModel's weights hold them.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "ir/graph.h"
#include "ops/interpreter.h"
#include "support/error.h"

namespace kiln::ops {
class OpRegistry;
}

namespace kiln::frontend {

struct OnnxImportOptions {
  // Shapes of graph inputs by name (--input-shape NAME:D0,D1,...): they bind
  // the inputs' symbolic dimensions.
  std::map<std::string, Shape> input_shapes;
  // A symbolic dimension named like a batch ("batch", "batch_size") or a
  // sequence ("seq", "sequence", "seq_len") takes these when set (> 0).
  int64_t batch = 0;
  int64_t seq = 0;
  std::shared_ptr<const ops::OpRegistry> ops;
};

struct OnnxModel {
  Graph graph;
  ops::TensorMap weights; // the initializers (and constants) by input name
};

// Reads --input-shape's NAME:D0,D1,... (NAME: for a scalar); errors say
// what was expected.
Expected<std::pair<std::string, Shape>> parseInputShape(const std::string &text);

// True for a path kiln reads as an ONNX model (its name ends in .onnx).
bool isOnnxPath(const std::string &path);

// Reads and imports `path`; errors name the file (and the node), with a
// code from onnx/onnx_errors.h.
Expected<OnnxModel> loadOnnxModel(const std::string &path, const OnnxImportOptions &options);
// The same for a model's bytes in memory, named `source` (external data is
// looked for beside it).
Expected<OnnxModel> importOnnxModel(const std::string &bytes, const std::string &source,
                                    const OnnxImportOptions &options);

} // namespace kiln::frontend
