// Finding NaN and inf in tensors read from files. Weights, adapters and
// optimizer state holding one cannot be trained from (every update of the
// tensor, and through it the loss, turns NaN), so training and merging
// refuse them where they are read; kiln run only reports them, since a user
// may be debugging the overflow that made them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "support/error.h"

namespace kiln {

// The first element of `t` that is NaN or inf; nothing when every one is
// finite (always, for an integer or bool tensor). Reads the bits of F32, F16
// and BF16 elements: one pass, no conversion.
std::optional<int64_t> firstNonFiniteElement(const Tensor &t);

// One tensor holding a value that is not finite: its first such element.
struct NonFiniteTensor {
  std::string name;
  int64_t element = 0;
  float value = 0; // NaN, inf or -inf
};

// Every tensor of `tensors` holding a NaN or inf, in name order.
std::vector<NonFiniteTensor> nonFiniteTensors(const std::map<std::string, Tensor> &tensors);

// "FILE: tensor 'NAME' element K is nan" for the first bad tensor of `file`,
// with how many more there are; empty when all are finite.
std::string describeNonFinite(const std::vector<NonFiniteTensor> &bad, const std::string &file);

// An error when a tensor of `tensors` (read from `file`) holds a NaN or inf:
// "FILE: tensor 'NAME' element K is nan, ...: <why>". `why` says what
// refuses it and what to do.
Status refuseNonFinite(const std::map<std::string, Tensor> &tensors, const std::string &file,
                       const std::string &why);

// Why a training run refuses them, for refuseNonFinite.
inline constexpr const char *kTrainingNeedsFiniteValues =
    "training cannot start from NaN or inf (every update through it would be NaN); start from "
    "weights saved before the overflow";

} // namespace kiln
