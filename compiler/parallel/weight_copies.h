// Weights read in the dtype the step computes in: under mixed precision the
// step casts every f32 weight to bf16 (or f16) before its matmuls, once per
// micro-batch and once on every data-parallel replica. Instead the runtime
// holds each such weight's compute copy beside it and the update writes the
// copy with the weight, in the same pass over memory (Megatron keeps bf16
// model parameters beside its fp32 main parameters the same way). The step
// then reads the copy and casts nothing.
#pragma once

#include <map>
#include <set>
#include <string>

#include "ir/graph.h"

namespace kiln::parallel {

// Rewrites `step`, after the precision passes: every Cast of a graph input
// named in `weights` to a narrower float dtype is replaced by the input
// autodiff::weightCopyName(weight) of that dtype (role WeightCopy), which the
// runtime holds equal to the Cast of the weight (the same rounding: the
// update makes it with the job's Cast). A weight cast to two different
// dtypes keeps its Casts. The weight's own input stays, read by whatever
// read it besides the Casts (or by nothing). Returns the weights rewritten
// and their copies' dtype.
std::map<std::string, DType> readWeightCopies(Graph &step, const std::set<std::string> &weights);

} // namespace kiln::parallel
