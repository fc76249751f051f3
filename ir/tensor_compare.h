// Whether two tensors agree within a tolerance, element by element, the one
// rule tests and debugging tools share.
#pragma once

#include <string>

#include "ir/tensor.h"

namespace kiln {

// Empty when `got` has `want`'s type and every element satisfies
// |got - want| <= atol + rtol * |want| (NaN matches NaN, inf the same inf;
// integers and bools must be equal); otherwise the first mismatch, readable.
std::string firstMismatch(const Tensor &got, const Tensor &want, double rtol, double atol);

} // namespace kiln
