// Central finite-difference check of an op's gradient rule.
//
// Builds one node of the op, applies its gradient rule to random output
// cotangents w_k, runs both on the reference interpreter and compares each
// input gradient with (L(x + eps) - L(x - eps)) / 2eps for L = sum_k <out_k, w_k>.
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "ir/attribute.h"
#include "ir/tensor.h"
#include "ops/op_registry.h"

namespace kiln::testing {

struct GradCheckInput {
  TensorType type;
  bool differentiable = true;
  std::optional<Tensor> value; // fixed data (indices, labels); random otherwise
  float lo = -1.0f, hi = 1.0f; // range of random data
};

struct GradCheckOptions {
  double eps = 1e-2;
  double rtol = 2e-2;
  double atol = 2e-3;
  int max_elements = 48; // elements probed per input (a deterministic sample)
  uint64_t seed = 1;
  // The vocabulary the op is in (a job's custom ops); null: the built-in ops.
  std::shared_ptr<const ops::OpRegistry> ops;
};

::testing::AssertionResult checkOpGradient(std::string_view op,
                                           const std::vector<GradCheckInput> &inputs,
                                           const AttrMap &attrs = {},
                                           const GradCheckOptions &options = {});

} // namespace kiln::testing
