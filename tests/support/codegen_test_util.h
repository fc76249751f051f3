// Compiled kernels against the reference interpreter: compile a graph's
// kernels (its fusion groups as they stand), run them on the executor and the
// interpreter (kernel numerics) on the same inputs, and compare every output.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ir/graph.h"
#include "ops/interpreter.h"
#include "runtime/executor.h"

namespace kiln::testing {

struct CompareOptions {
  OverflowMode overflow = OverflowMode::InfNan;
  std::string target = "ascend910b";
  // Allowed |compiled - reference| <= atol + rtol * |reference|; defaults by
  // the output's dtype when negative (f32 1e-5, f16 2e-3, bf16 1.6e-2 relative).
  double rtol = -1;
  double atol = -1;
  // Integer outputs and bools must match exactly; NaN matches NaN and inf
  // matches inf of the same sign.
};

// `graph`'s kernels compiled for `target` and loaded on an executor; null
// (and a test failure) where either fails.
std::unique_ptr<runtime::Executor> compiledExecutor(const Graph &graph,
                                                    const std::string &target = "ascend910b",
                                                    OverflowMode overflow = OverflowMode::InfNan);

// The optimised LLVM IR of `graph`'s one kernel (a test failure, and empty,
// where it compiles to another number of kernels).
std::string kernelIr(const Graph &graph);

// Runs `graph` compiled and on the interpreter; returns the compiled outputs.
ops::TensorMap expectCompiledMatchesReference(const Graph &graph, const ops::TensorMap &inputs,
                                              const CompareOptions &options = {});

// Inputs for every graph input of `graph`: floats uniform in [lo, hi),
// integers in [0, int_bound).
ops::TensorMap randomInputs(const Graph &graph, uint64_t seed, float lo = -2.0f, float hi = 2.0f,
                            int64_t int_bound = 8);

// One node of `op` on random inputs of `inputs`' types, compiled vs
// reference; `vocabulary` holds the ops beyond the built-in ones.
void expectOpMatchesReference(const std::string &op, const std::vector<TensorType> &inputs,
                              const AttrMap &attrs = {}, const CompareOptions &options = {},
                              uint64_t seed = 1,
                              const std::shared_ptr<const ops::OpRegistry> &vocabulary = nullptr);

// One `op` node on the given inputs, compiled vs reference.
void expectOpOnInputs(const std::string &op, const std::vector<Tensor> &inputs,
                      const AttrMap &attrs = {}, const CompareOptions &options = {});

// Compares two tensors element by element; returns the first mismatch, empty when they agree.
std::string compareTensors(const Tensor &got, const Tensor &want, double rtol, double atol);

} // namespace kiln::testing
