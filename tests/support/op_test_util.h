// Helpers for the op tests: infer or run one node of an op the way a user
// graph gets it (through OpBuilder, on the reference interpreter), and naive
// row-major index arithmetic.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "ir/tensor.h"
#include "ops/interpreter.h"
#include "ops/op_builder.h"
#include "support/error.h"
#include "tests/support/gradient_check.h"

namespace kiln::testing {

inline TensorType f32(Shape shape) { return TensorType{DType::F32, std::move(shape)}; }

// Output types of one `op` node on inputs of `types`, or the builder's error.
// `vocabulary`: the ops beyond the built-in ones (a job's custom ops).
inline Expected<std::vector<TensorType>>
inferOp(std::string_view op, const std::vector<TensorType> &types, const AttrMap &attrs = {},
        const std::shared_ptr<const ops::OpRegistry> &vocabulary = nullptr) {
  Graph g("infer");
  g.setVocabulary(vocabulary);
  std::vector<ValueId> args;
  for (size_t i = 0; i < types.size(); ++i)
    args.push_back(g.addInput("in_" + std::to_string(i), types[i], InputRole::Data));
  ops::OpBuilder b(g);
  KILN_ASSIGN_OR_RETURN(std::vector<ValueId> outs, b.tryCreate(op, "op", args, attrs));
  std::vector<TensorType> result;
  for (ValueId v : outs)
    result.push_back(g.type(v));
  return result;
}

// Runs one `op` node on `inputs` with the reference interpreter.
inline Expected<std::vector<Tensor>>
runOp(std::string_view op, const std::vector<Tensor> &inputs, const AttrMap &attrs = {},
      OverflowMode mode = OverflowMode::InfNan,
      const std::shared_ptr<const ops::OpRegistry> &vocabulary = nullptr) {
  Graph g("run");
  g.setVocabulary(vocabulary);
  std::vector<ValueId> args;
  ops::TensorMap feed;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string name = "in_" + std::to_string(i);
    args.push_back(g.addInput(name, inputs[i].type(), InputRole::Data));
    feed[name] = inputs[i];
  }
  ops::OpBuilder b(g);
  KILN_ASSIGN_OR_RETURN(std::vector<ValueId> outs, b.tryCreate(op, "op", args, attrs));
  for (size_t k = 0; k < outs.size(); ++k)
    g.addOutput("out_" + std::to_string(k), outs[k]);
  ops::InterpretOptions options;
  options.overflow = mode;
  KILN_ASSIGN_OR_RETURN(ops::TensorMap results, ops::interpret(g, feed, options));
  std::vector<Tensor> result;
  for (size_t k = 0; k < outs.size(); ++k)
    result.push_back(results.at("out_" + std::to_string(k)));
  return result;
}

// Convenience for single-output ops in tests: asserts success.
inline Tensor run1(std::string_view op, const std::vector<Tensor> &inputs,
                   const AttrMap &attrs = {}, OverflowMode mode = OverflowMode::InfNan,
                   const std::shared_ptr<const ops::OpRegistry> &vocabulary = nullptr) {
  auto out = runOp(op, inputs, attrs, mode, vocabulary);
  EXPECT_TRUE(out.isOk()) << op << ": " << (out ? std::string() : out.message());
  if (!out || out->size() != 1)
    return Tensor();
  return std::move(out->front());
}

// A random differentiable input of `type` for checkOpGradient, data in [lo, hi).
inline GradCheckInput gradInput(TensorType type, float lo = -1.0f, float hi = 1.0f) {
  GradCheckInput in;
  in.type = std::move(type);
  in.lo = lo;
  in.hi = hi;
  return in;
}

// A non-differentiable gradient-check input with fixed data (indices, labels).
inline GradCheckInput fixedInput(const Tensor &value) {
  GradCheckInput in;
  in.type = value.type();
  in.differentiable = false;
  in.value = value;
  return in;
}

// Multi-index of flat row-major position `flat` in `shape`.
inline std::vector<int64_t> unflatten(int64_t flat, const Shape &shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t a = shape.size(); a-- > 0;) {
    index[a] = flat % shape[a];
    flat /= shape[a];
  }
  return index;
}

// Flat row-major position of `index` in `shape`.
inline int64_t flatten(const std::vector<int64_t> &index, const Shape &shape) {
  int64_t flat = 0;
  for (size_t a = 0; a < shape.size(); ++a)
    flat = flat * shape[a] + index[a];
  return flat;
}

// True when the error message contains every one of `parts`.
inline ::testing::AssertionResult mentions(const std::string &message,
                                           const std::vector<std::string> &parts) {
  for (const std::string &p : parts)
    if (message.find(p) == std::string::npos)
      return ::testing::AssertionFailure() << "'" << message << "' does not mention '" << p << "'";
  return ::testing::AssertionSuccess();
}

} // namespace kiln::testing
