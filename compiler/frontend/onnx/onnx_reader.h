// Reads an ONNX model file (protobuf, through Debian's libonnx) within
// limits, and its tensors (initializers, Constant values, test data files)
// into kiln Tensors, external data included.
#pragma once

#include <memory>
#include <string>

#include <onnx/onnx_pb.h>

#include "ir/tensor.h"
#include "support/error.h"

namespace kiln::frontend::onnx_import {

struct ReadLimits {
  int64_t max_file_bytes = int64_t{2} << 30; // protobuf's own limit
  int64_t max_nodes = 1'000'000;             // in the main graph
  int max_depth = 64;                        // protobuf message nesting
};

// Parses `path` as a ModelProto. Refuses, each with its own message and a
// code from onnx_errors.h: a file that is not there, larger than the limit,
// not a protobuf ModelProto, truncated, with more nodes than the limit
// (counted before the nodes are parsed), or nested deeper than the limit.
Expected<std::unique_ptr<onnx::ModelProto>> readOnnxModel(const std::string &path,
                                                          const ReadLimits &limits = {});
// The same for bytes in memory (`source` names them in messages).
Expected<std::unique_ptr<onnx::ModelProto>>
parseOnnxModel(const std::string &bytes, const std::string &source, const ReadLimits &limits = {});

// The kiln dtype of an ONNX TensorProto data type, or an error naming it.
Expected<DType> dtypeOfOnnx(int32_t onnx_type);
const char *onnxTypeName(int32_t onnx_type);

// A TensorProto's values as a kiln Tensor: raw_data, the typed fields, or
// external data read from a file below `model_dir` (a location that leaves
// the folder, is missing, or is shorter than the tensor is an error). The
// element count must agree with the dims.
Expected<Tensor> tensorFromOnnx(const onnx::TensorProto &proto, const std::string &model_dir,
                                const std::string &what);

// Reads a serialized TensorProto file (a backend test's input_0.pb).
Expected<Tensor> readOnnxTensorFile(const std::string &path, std::string *name = nullptr);

} // namespace kiln::frontend::onnx_import
