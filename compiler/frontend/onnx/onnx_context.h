// What an ONNX operator's conversion sees: its node, the values of its
// inputs (a graph value, a constant known while importing, or both), the
// builder of the kiln graph, and where its outputs go. One ConvertFn per
// operator, registered in the onnx_ops_*.cpp files by op type.
#pragma once

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <onnx/onnx_pb.h>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "ops/interpreter.h"
#include "ops/op_builder.h"
#include "support/error.h"

namespace kiln::frontend::onnx_import {

// An ONNX value while importing.
struct OnnxValue {
  ValueId value = kNoValue;       // in the graph, once there
  std::optional<Tensor> constant; // known while importing
  bool initializer = false;       // a weight: becomes a graph input, never folded
};

// Thrown by Converter::type() for an input the node does not have, and
// caught where the importer calls the converter (onnx_importer.cpp).
struct MissingInput : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Converter {
public:
  Converter(ops::OpBuilder &b, std::unordered_map<std::string, OnnxValue> &env,
            ops::TensorMap &weights, const onnx::NodeProto &node, int64_t opset, int version,
            std::string name)
      : b_(b), env_(env), weights_(weights), node_(node), opset_(opset), version_(version),
        name_(std::move(name)) {}

  ops::OpBuilder &builder() { return b_; }
  const onnx::NodeProto &node() const { return node_; }
  int64_t opset() const { return opset_; }
  // The operator's version the model's opset selects (onnx_versions.h):
  // conversions branch on it where ONNX changed an operator.
  int version() const { return version_; }
  const std::string &name() const { return name_; }

  // Inputs; an empty name is an omitted optional input.
  size_t numInputs() const { return static_cast<size_t>(node_.input_size()); }
  bool has(size_t i) const { return i < numInputs() && !node_.input(static_cast<int>(i)).empty(); }
  // The input's value when it is known while importing.
  const Tensor *constant(size_t i) const;
  // The input as a graph value (a constant is added to the graph).
  Expected<ValueId> value(size_t i);
  TensorType type(size_t i) const;
  // A constant integer input read as int64s; an error naming `what` when
  // the input is computed at run time.
  Expected<std::vector<int64_t>> ints(size_t i, const std::string &what) const;
  Expected<double> scalar(size_t i, const std::string &what) const;
  // The node that makes graph value `v` when it is an `op`; null for a graph
  // input or another op. The rewrites that give kiln's fusions their
  // patterns (1 / sqrt(x) as Rsqrt, x * sigmoid(x) as Silu) look back so.
  const Node *producer(ValueId v, std::string_view op);

  // Attributes.
  const onnx::AttributeProto *attr(const std::string &name) const;
  int64_t intAttr(const std::string &name, int64_t fallback) const;
  float floatAttr(const std::string &name, float fallback) const;
  std::string stringAttr(const std::string &name, const std::string &fallback) const;
  std::optional<std::vector<int64_t>> intsAttr(const std::string &name) const;

  // Outputs.
  size_t numOutputs() const { return static_cast<size_t>(node_.output_size()); }
  bool wants(size_t k) const {
    return k < numOutputs() && !node_.output(static_cast<int>(k)).empty();
  }
  void setOutput(size_t k, ValueId v);
  void setConstant(size_t k, Tensor t);

  // A kiln node named after the ONNX node (sticky errors: builder().status()).
  ValueId create(std::string_view op, std::vector<ValueId> inputs, const AttrMap &attrs = {},
                 std::string_view suffix = "");
  ValueId constantOf(double value, DType dtype, Shape shape = {});
  // A tensor known while importing, added to the graph as materialize() does.
  ValueId tensor(Tensor t, std::string_view suffix);
  ValueId reshape(ValueId x, Shape shape);
  ValueId cast(ValueId x, DType to);

  // Coded refusals naming the node, its op type and opset.
  Error unsupported(const std::string &what) const;
  Error unsupportedType(const std::string &what) const;
  Error invalid(const std::string &what) const;

private:
  ops::OpBuilder &b_;
  std::unordered_map<std::string, OnnxValue> &env_;
  ops::TensorMap &weights_;
  const onnx::NodeProto &node_;
  int64_t opset_;
  int version_;
  std::string name_;
};

// Adds `value`'s constant to the graph (a Fill when every element is one
// value, else a graph input whose tensor goes into `weights`).
ValueId materialize(ops::OpBuilder &b, const std::string &name, OnnxValue &value,
                    ops::TensorMap &weights);

using ConvertFn = std::function<Status(Converter &)>;

// The conversions by ONNX op type; each onnx_ops_*.cpp registers its own.
const ConvertFn *findConverter(const std::string &op_type);
std::vector<std::string> convertedOps();
bool registerConverter(const char *op_type, ConvertFn fn);

// Helpers the conversions share.
Expected<int64_t> normalizedAxis(const Converter &c, int64_t axis, int64_t rank);
// x - max - log(sum(exp(x - max))) over `axis` (onnx_ops_nn.cpp).
ValueId logSoftmax(Converter &c, ValueId x, int64_t axis);

} // namespace kiln::frontend::onnx_import

#define KILN_REGISTER_ONNX_OP(OP, FN)                                                              \
  [[maybe_unused]] static const bool KILN_CONCAT(kiln_onnx_op_registered_, __LINE__) =             \
      ::kiln::frontend::onnx_import::registerConverter(OP, FN)
