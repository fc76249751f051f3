// The operator version table. ONNX's since-versions come from its operator
// changelog (ONNX 1.13 for opset 18: the Reduce family's axes input and
// Split's num_outputs); onnx_versions_test checks them against libonnx's
// schema registry for the opsets it knows. A version below kMinOpset is
// listed where an opset of 7 or more still selects it (Softmax-1 at opset
// 7 to 10).
#include "compiler/frontend/onnx/onnx_versions.h"

#include <algorithm>

namespace kiln::frontend::onnx_import {

namespace {

// Unary math whose versions are 1 (consumed_inputs), 6 and 13 (bfloat16).
OpVersions unaryMath(std::string_view op) { return {op, {1, 6, 13}, {6, 13}}; }
// Binary arithmetic: 7 broadcasts numpy's way, 13 adds bfloat16, 14 the
// small integers.
OpVersions arithmetic(std::string_view op) { return {op, {1, 6, 7, 13, 14}, {7, 13, 14}}; }
// Reductions: axes an attribute before 18 (before 13 for ReduceSum).
OpVersions reduction(std::string_view op, std::vector<int> onnx) {
  return {op, onnx, onnx,
          op == "ReduceSum" ? "axes an attribute before 13, an input from it"
                            : "axes an attribute before 18, an input from it"};
}

std::vector<OpVersions> buildTable() {
  std::vector<OpVersions> t = {
      arithmetic("Add"),
      arithmetic("Sub"),
      arithmetic("Mul"),
      arithmetic("Div"),
      {"Pow", {1, 7, 12, 13, 15}, {7, 12, 13, 15}},
      unaryMath("Neg"),
      unaryMath("Abs"),
      unaryMath("Exp"),
      unaryMath("Log"),
      unaryMath("Sqrt"),
      unaryMath("Tanh"),
      unaryMath("Sigmoid"),
      unaryMath("Reciprocal"),
      {"Erf", {9, 13}, {9, 13}},
      {"Sin", {7}, {7}},
      {"Cos", {7}, {7}},
      {"Relu", {1, 6, 13, 14}, {6, 13, 14}},
      {"LeakyRelu", {1, 6, 16}, {6, 16}},
      {"Softplus", {1}, {1}},
      {"Softsign", {1}, {1}},
      {"Min", {1, 6, 8, 12, 13}, {6, 8, 12, 13}},
      {"Max", {1, 6, 8, 12, 13}, {6, 8, 12, 13}},
      {"Sum", {1, 6, 8, 13}, {6, 8, 13}},
      {"Mean", {1, 6, 8, 13}, {6, 8, 13}},
      {"Clip",
       {1, 6, 11, 12, 13},
       {6, 11, 12, 13},
       "min and max attributes before 11, inputs from it"},
      {"Where", {9, 16}, {9, 16}},
      {"Equal", {1, 7, 11, 13}, {7, 11, 13}},
      {"Less", {1, 7, 9, 13}, {7, 9, 13}},
      {"Greater", {1, 7, 9, 13}, {7, 9, 13}},
      {"LessOrEqual", {12, 16}, {12, 16}},
      {"GreaterOrEqual", {12, 16}, {12, 16}},
      {"Not", {1}, {1}},
      {"And", {1, 7}, {7}},
      {"Or", {1, 7}, {7}},
      {"Xor", {1, 7}, {7}},
      {"Cast", {1, 6, 9, 13}, {6, 9, 13}},
      {"CastLike", {15}, {15}},
      {"Identity", {1, 13, 14, 16}, {1, 13, 14, 16}},
      {"MatMul", {1, 9, 13}, {1, 9, 13}},
      {"Gemm", {1, 6, 7, 9, 11, 13}, {7, 9, 11, 13}},
      {"Einsum", {12}, {12}},
      {"Softmax",
       {1, 11, 13},
       {1, 11, 13},
       "before 13 the input is coerced to 2-D at axis (default 1)"},
      {"LogSoftmax",
       {1, 11, 13},
       {1, 11, 13},
       "before 13 the input is coerced to 2-D at axis (default 1)"},
      {"LayerNormalization", {17}, {17}},
      {"SoftmaxCrossEntropyLoss", {12, 13}, {12, 13}},
      {"NegativeLogLikelihoodLoss", {12, 13}, {12, 13}},
      reduction("ReduceSum", {1, 11, 13}),
      reduction("ReduceMean", {1, 11, 13, 18}),
      reduction("ReduceMax", {1, 11, 12, 13, 18}),
      reduction("ReduceMin", {1, 11, 12, 13, 18}),
      reduction("ReduceSumSquare", {1, 11, 13, 18}),
      reduction("ReduceL1", {1, 11, 13, 18}),
      reduction("ReduceL2", {1, 11, 13, 18}),
      reduction("ReduceLogSum", {1, 11, 13, 18}),
      reduction("ReduceLogSumExp", {1, 11, 13, 18}),
      {"Shape", {1, 13, 15}, {1, 13, 15}, "start and end from 15"},
      {"Size", {1, 13}, {1, 13}},
      {"Reshape", {1, 5, 13, 14}, {5, 13, 14}},
      {"Flatten", {1, 9, 11, 13}, {1, 9, 11, 13}},
      {"Squeeze", {1, 11, 13}, {1, 11, 13}, "axes an attribute before 13"},
      {"Unsqueeze", {1, 11, 13}, {1, 11, 13}, "axes an attribute before 13"},
      {"Transpose", {1, 13}, {1, 13}},
      {"Concat", {1, 4, 11, 13}, {4, 11, 13}},
      {"Split",
       {1, 2, 11, 13, 18},
       {2, 11, 13, 18},
       "split an attribute before 13; num_outputs from 18"},
      {"Slice", {1, 10, 11, 13}, {1, 10, 11, 13}, "starts, ends and axes attributes before 10"},
      {"Gather", {1, 11, 13}, {1, 11, 13}},
      {"GatherElements", {11, 13}, {11, 13}},
      {"Expand", {8, 13}, {8, 13}},
      {"Tile", {1, 6, 13}, {6, 13}},
      {"Trilu", {14}, {14}},
      {"Range", {11}, {11}},
      {"Constant", {1, 9, 11, 12, 13}, {1, 9, 11, 12, 13}},
      {"ConstantOfShape", {9}, {9}},
      {"Dropout",
       {1, 6, 7, 10, 12, 13},
       {7, 10, 12, 13},
       "ratio an attribute before 12; the mask of the input's type before 10"},
  };
  std::sort(t.begin(), t.end(), [](const auto &a, const auto &b) { return a.op < b.op; });
  return t;
}

} // namespace

const std::vector<OpVersions> &opVersionTable() {
  static const std::vector<OpVersions> table = buildTable();
  return table;
}

const OpVersions *findOpVersions(std::string_view op) {
  const auto &t = opVersionTable();
  auto it = std::lower_bound(t.begin(), t.end(), op,
                             [](const OpVersions &v, std::string_view o) { return v.op < o; });
  return it != t.end() && it->op == op ? &*it : nullptr;
}

int resolveVersion(const OpVersions &versions, int64_t opset) {
  int resolved = 0;
  for (int v : versions.onnx)
    if (v <= opset)
      resolved = v;
  return resolved;
}

bool kilnReads(const OpVersions &versions, int version) {
  return std::find(versions.kiln.begin(), versions.kiln.end(), version) != versions.kiln.end();
}

std::string versionList(const std::vector<int> &versions) {
  std::string s;
  for (size_t i = 0; i < versions.size(); ++i) {
    if (i > 0)
      s += i + 1 == versions.size() ? " and " : ", ";
    s += std::to_string(versions[i]);
  }
  return s;
}

} // namespace kiln::frontend::onnx_import
