// The reference interpreter: runs any graph node by node with the ops'
// reference kernels. Simple and exact; the oracle for passes and kernels.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "ops/op_registry.h"
#include "support/error.h"

namespace kiln::ops {

using TensorMap = std::map<std::string, Tensor>;

struct InterpretOptions {
  OverflowMode overflow = OverflowMode::InfNan;
  // Run each fusion group as the one kernel it stands for: with
  // Intermediates::F32, values that stay inside the group are held in f32 and
  // only the group's outputs are rounded to their dtype (explicit Casts still
  // round). Off: every node rounds its results, as if nothing were fused.
  bool fused_numerics = true;
  // Called after each node with its outputs; an error stops the run.
  std::function<Status(const Node &node, const std::vector<Tensor> &outputs)> after_node;
};

// Puts every graph input of `graph` from `inputs` (by name, with exactly its
// type) into `values` (indexed by ValueId); an error names the input.
Status bindGraphInputs(const Graph &graph, const TensorMap &inputs, std::vector<Tensor> &values);

// The reference interpreter runs a graph node by node, in the graph's order.
// `inputs` must hold every graph input by name with exactly its type. Returns
// the graph outputs by name. Values are freed after their last use. Each
// node runs its op's reference kernel from the graph's vocabulary (opsOf).
Expected<TensorMap> interpret(const Graph &graph, const TensorMap &inputs,
                              const InterpretOptions &options = {});

} // namespace kiln::ops
