// Two runs of one model compared value by value, in execution order: the
// compiled kernels against the reference interpreter, or the fused graph
// against the unfused one. The table says how far apart every value is and
// which is the first to leave the tolerance — where to look.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/codegen/kernel_compiler.h"
#include "ir/graph.h"
#include "ops/interpreter.h"

namespace kiln::debug {

struct ValueError {
  std::string name; // the value: its producing node's name (or "node#k")
  std::string op;
  DType dtype = DType::F32;
  int64_t elements = 0;
  double max_abs = 0;
  double max_rel = 0;    // over elements whose reference magnitude exceeds the tolerance
  int64_t outside = 0;   // elements with |a - b| > tol + tol * |b|
  int64_t nonfinite = 0; // elements finite in one run and not in the other
  bool diverges() const { return outside > 0 || nonfinite > 0; }
};

struct CompareReport {
  std::string against; // "reference" or "unfused"
  double tolerance = 0;
  std::vector<ValueError> values; // execution order of the first run
  std::optional<size_t> first_divergence;

  nlohmann::json toJson() const;
  // The first divergence and the `top` values with the largest relative error.
  std::string toText(size_t top = 10) const;
};

// Every value each run produced, by value name (floats rounded to their dtype).
using ValueTrace = std::vector<std::pair<std::string, Tensor>>;

// The values the compiled kernels store (each kernel's outputs), in order.
Expected<ValueTrace> traceCompiled(const Graph &graph, codegen::CompiledKernels kernels,
                                   const ops::TensorMap &inputs);
// Every node output on the reference interpreter, in order.
Expected<ValueTrace> traceReference(const Graph &graph, const ops::TensorMap &inputs,
                                    OverflowMode overflow);

// Compares the values `got` and `want` share, in `got`'s order. The ops come
// from `graph` (the graph `got` ran).
CompareReport compareTraces(const Graph &graph, const ValueTrace &got, const ValueTrace &want,
                            double tolerance);

} // namespace kiln::debug
