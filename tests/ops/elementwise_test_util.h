// Helpers for the elementwise op tests: shape inference as a user graph gets
// it (through OpBuilder) and single-node runs on the reference interpreter.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "ops/interpreter.h"
#include "ops/op_builder.h"

namespace kiln::testing::elementwise {

// Output types of one `op` node with inputs of `types`.
inline Expected<std::vector<TensorType>>
inferOp(std::string_view op, const std::vector<TensorType> &types, const AttrMap &attrs = {}) {
  Graph graph("infer");
  std::vector<ValueId> args;
  for (size_t i = 0; i < types.size(); ++i)
    args.push_back(graph.addInput("in_" + std::to_string(i), types[i], InputRole::Data));
  ops::OpBuilder b(graph);
  KILN_ASSIGN_OR_RETURN(std::vector<ValueId> outs, b.tryCreate(op, "op", args, attrs));
  std::vector<TensorType> out_types;
  for (ValueId v : outs)
    out_types.push_back(graph.type(v));
  return out_types;
}

// Runs one `op` node on `inputs` and returns its outputs in order.
inline Expected<std::vector<Tensor>> runOp(std::string_view op, const std::vector<Tensor> &inputs,
                                           const AttrMap &attrs = {},
                                           OverflowMode mode = OverflowMode::InfNan) {
  Graph graph("run");
  std::vector<ValueId> args;
  ops::TensorMap feed;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string name = "in_" + std::to_string(i);
    args.push_back(graph.addInput(name, inputs[i].type(), InputRole::Data));
    feed[name] = inputs[i];
  }
  ops::OpBuilder b(graph);
  KILN_ASSIGN_OR_RETURN(std::vector<ValueId> outs, b.tryCreate(op, "op", args, attrs));
  for (size_t k = 0; k < outs.size(); ++k)
    graph.addOutput("out_" + std::to_string(k), outs[k]);
  ops::InterpretOptions options;
  options.overflow = mode;
  KILN_ASSIGN_OR_RETURN(ops::TensorMap results, ops::interpret(graph, feed, options));
  std::vector<Tensor> out;
  for (size_t k = 0; k < outs.size(); ++k)
    out.push_back(results.at("out_" + std::to_string(k)));
  return out;
}

// Convenience for single-output ops in tests: asserts success.
inline Tensor run1(std::string_view op, const std::vector<Tensor> &inputs,
                   const AttrMap &attrs = {}, OverflowMode mode = OverflowMode::InfNan) {
  auto out = runOp(op, inputs, attrs, mode);
  EXPECT_TRUE(out.isOk()) << op << ": " << (out ? std::string() : out.message());
  if (!out || out->size() != 1)
    return Tensor();
  return std::move(out->front());
}

} // namespace kiln::testing::elementwise
