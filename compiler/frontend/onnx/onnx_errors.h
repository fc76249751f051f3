// The codes of the ONNX frontend's errors (ATC's E1xxxx range for the model
// a user hands in), so a script can tell a refused operator from a damaged
// file without reading the message.
#pragma once

#include <string>

namespace kiln::frontend::onnx_import {

inline constexpr const char *kErrOnnxMalformed = "E12001";    // not a readable ONNX model
inline constexpr const char *kErrOnnxLimit = "E12002";        // past the size, node or depth limits
inline constexpr const char *kErrOnnxExternalData = "E12003"; // external data missing or outside
inline constexpr const char *kErrOnnxGraph = "E12004";        // a cycle, an undefined value
inline constexpr const char *kErrOnnxUnsupportedOp = "E12010";   // an operator kiln lacks
inline constexpr const char *kErrOnnxUnsupportedAttr = "E12011"; // an attribute or input form
inline constexpr const char *kErrOnnxUnsupportedType = "E12012"; // a dtype kiln lacks
inline constexpr const char *kErrOnnxOpset = "E12013";           // an opset or domain kiln lacks
inline constexpr const char *kErrOnnxUnboundDim = "E12020"; // a symbolic dimension left unbound
inline constexpr const char *kErrOnnxLoss = "E12030";       // --loss names no scalar float output

// True for the codes that say "kiln does not support this", as opposed to
// "this file is broken".
inline bool isUnsupportedCode(const std::string &code) {
  return code == kErrOnnxUnsupportedOp || code == kErrOnnxUnsupportedAttr ||
         code == kErrOnnxUnsupportedType || code == kErrOnnxOpset;
}

} // namespace kiln::frontend::onnx_import
