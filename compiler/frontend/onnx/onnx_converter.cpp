// The Converter's helpers and the registry of operator conversions.
#include <algorithm>
#include <cmath>
#include <map>

#include "compiler/frontend/onnx/onnx_context.h"
#include "compiler/frontend/onnx/onnx_errors.h"

namespace kiln::frontend::onnx_import {

namespace {

std::map<std::string, ConvertFn> &converters() {
  static std::map<std::string, ConvertFn> table;
  return table;
}

} // namespace

const ConvertFn *findConverter(const std::string &op_type) {
  auto it = converters().find(op_type);
  return it == converters().end() ? nullptr : &it->second;
}

std::vector<std::string> convertedOps() {
  std::vector<std::string> names;
  for (const auto &[name, fn] : converters())
    names.push_back(name);
  return names;
}

bool registerConverter(const char *op_type, ConvertFn fn) {
  converters()[op_type] = std::move(fn);
  return true;
}

ValueId materialize(ops::OpBuilder &b, const std::string &name, OnnxValue &v,
                    ops::TensorMap &weights) {
  if (v.value != kNoValue || !v.constant)
    return v.value;
  const Tensor &t = *v.constant;
  const int64_t n = t.numElements();
  bool uniform = !v.initializer && n > 0;
  for (int64_t i = 1; uniform && i < n; ++i)
    uniform = isFloat(t.dtype()) ? (t.getFloat(i) == t.getFloat(0) ||
                                    (std::isnan(t.getFloat(i)) && std::isnan(t.getFloat(0))))
                                 : t.getInt(i) == t.getInt(0);
  if (uniform && !isFloat(t.dtype()) && std::abs(t.getInt(0)) > (int64_t{1} << 53))
    uniform = false; // Fill holds its value as a double
  if (uniform && isFloat(t.dtype()) && !std::isfinite(t.getFloat(0)))
    uniform = false;
  if (uniform) {
    const double value = isFloat(t.dtype()) ? double(t.getFloat(0)) : double(t.getInt(0));
    v.value = b.constant(value, t.dtype(), name, t.shape());
    return v.value;
  }
  std::string input = name;
  for (int k = 1; b.graph().findInput(input) || weights.count(input); ++k)
    input = name + "_" + std::to_string(k);
  const InputRole role =
      v.initializer && isFloat(t.dtype()) ? InputRole::Parameter : InputRole::Frozen;
  v.value = b.graph().addInput(input, t.type(), role);
  weights[input] = t;
  return v.value;
}

const Node *Converter::producer(ValueId v, std::string_view op) {
  const Graph &g = b_.graph();
  const NodeId p = g.value(v).producer;
  return p != kNoNode && g.node(p).op == op ? &g.node(p) : nullptr;
}

const Tensor *Converter::constant(size_t i) const {
  if (!has(i))
    return nullptr;
  auto it = env_.find(node_.input(static_cast<int>(i)));
  if (it == env_.end() || !it->second.constant ||
      (it->second.initializer && isFloat(it->second.constant->dtype())))
    return nullptr;
  return &*it->second.constant;
}

Expected<ValueId> Converter::value(size_t i) {
  if (!has(i))
    return Error("node '" + node_.name() + "' (" + node_.op_type() + "): input " +
                 std::to_string(i) + " is missing (the node has " + std::to_string(numInputs()) +
                 ")")
        .withCode(kErrOnnxMalformed);
  if (!has(i))
    return invalid("input " + std::to_string(i) + " is required");
  const std::string &name = node_.input(static_cast<int>(i));
  OnnxValue &v = env_.at(name);
  std::string kiln_name = name;
  std::replace(kiln_name.begin(), kiln_name.end(), '/', '.');
  ValueId id = materialize(b_, kiln_name, v, weights_);
  if (!b_.status())
    return b_.status().error();
  return id;
}

TensorType Converter::type(size_t i) const {
  // A converter asks for the inputs its operator has; a hostile node may
  // have fewer. The importer turns this into an error naming the node.
  if (!has(i))
    throw MissingInput("input " + std::to_string(i) + " is missing (the node has " +
                       std::to_string(numInputs()) + ")");
  const OnnxValue &v = env_.at(node_.input(static_cast<int>(i)));
  return v.value != kNoValue ? b_.type(v.value) : v.constant->type();
}

Expected<std::vector<int64_t>> Converter::ints(size_t i, const std::string &what) const {
  const Tensor *t = constant(i);
  if (!t)
    return unsupported(what + " (input " + std::to_string(i) +
                       ") must be known while compiling (a constant, an initializer or shape "
                       "arithmetic on static shapes); kiln compiles static shapes only");
  std::vector<int64_t> out(t->numElements());
  for (int64_t k = 0; k < t->numElements(); ++k)
    out[k] = isFloat(t->dtype()) ? static_cast<int64_t>(t->getFloat(k)) : t->getInt(k);
  return out;
}

Expected<double> Converter::scalar(size_t i, const std::string &what) const {
  const Tensor *t = constant(i);
  if (!t || t->numElements() != 1)
    return unsupported(what + " (input " + std::to_string(i) +
                       ") must be a single value known while compiling");
  return isFloat(t->dtype()) ? double(t->getFloat(0)) : double(t->getInt(0));
}

const onnx::AttributeProto *Converter::attr(const std::string &name) const {
  for (const auto &a : node_.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t Converter::intAttr(const std::string &name, int64_t fallback) const {
  const auto *a = attr(name);
  return a ? a->i() : fallback;
}

float Converter::floatAttr(const std::string &name, float fallback) const {
  const auto *a = attr(name);
  return a ? a->f() : fallback;
}

std::string Converter::stringAttr(const std::string &name, const std::string &fallback) const {
  const auto *a = attr(name);
  return a ? a->s() : fallback;
}

std::optional<std::vector<int64_t>> Converter::intsAttr(const std::string &name) const {
  const auto *a = attr(name);
  if (!a)
    return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

void Converter::setOutput(size_t k, ValueId v) {
  if (wants(k))
    env_[node_.output(static_cast<int>(k))] = OnnxValue{v, std::nullopt, false};
}

void Converter::setConstant(size_t k, Tensor t) {
  if (wants(k))
    env_[node_.output(static_cast<int>(k))] = OnnxValue{kNoValue, std::move(t), false};
}

ValueId Converter::create(std::string_view op, std::vector<ValueId> inputs, const AttrMap &attrs,
                          std::string_view suffix) {
  std::string n = suffix.empty() ? name_ : name_ + "." + std::string(suffix);
  return b_.create(op, n, std::move(inputs), attrs);
}

ValueId Converter::constantOf(double value, DType dtype, Shape shape) {
  return b_.constant(value, dtype, name_ + ".const", std::move(shape));
}

ValueId Converter::tensor(Tensor t, std::string_view suffix) {
  OnnxValue v{kNoValue, std::move(t), false};
  return materialize(b_, name_ + "." + std::string(suffix), v, weights_);
}

ValueId Converter::reshape(ValueId x, Shape shape) {
  if (x == kNoValue || b_.shape(x) == shape)
    return x;
  return create("Reshape", {x}, {{"shape", std::move(shape)}}, "reshape");
}

ValueId Converter::cast(ValueId x, DType to) {
  if (x == kNoValue || b_.dtype(x) == to)
    return x;
  return create("Cast", {x}, {{"dtype", to}}, "cast");
}

Error Converter::unsupported(const std::string &what) const {
  return Error("node '" + node_.name() + "' (" + node_.op_type() + ", opset " +
               std::to_string(opset_) + "): " + what)
      .withCode(kErrOnnxUnsupportedAttr);
}

Error Converter::unsupportedType(const std::string &what) const {
  return Error("node '" + node_.name() + "' (" + node_.op_type() + ", opset " +
               std::to_string(opset_) + "): " + what)
      .withCode(kErrOnnxUnsupportedType);
}

Error Converter::invalid(const std::string &what) const {
  return Error("node '" + node_.name() + "' (" + node_.op_type() + ", opset " +
               std::to_string(opset_) + "): " + what)
      .withCode(kErrOnnxGraph);
}

Expected<int64_t> normalizedAxis(const Converter &c, int64_t axis, int64_t rank) {
  // ONNX's range is [-r, r - 1]: a scalar has no axis (Gather or Split of
  // one would read past its empty shape).
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    return c.invalid("axis " + std::to_string(axis) + " is out of range for rank " +
                     std::to_string(rank));
  return a;
}

} // namespace kiln::frontend::onnx_import
