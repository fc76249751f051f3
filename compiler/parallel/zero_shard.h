// ZeRO-3 (Rajbhandari et al. 2019; MindSpore's parallel optimizer): every
// trained weight is kept on a device as its flat equal slice
// (ir/tensor_split.h takeFlatSlice), and the step gathers the whole weight
// from every replica's slice just before it is read: once for the forward
// and once more for the backward, so that between the two, and after each,
// no device holds it whole.
#pragma once

#include <set>
#include <string>

#include "ir/graph.h"
#include "support/error.h"

namespace kiln::parallel {

// `step` (buildTrainingStep's graph) with each trained weight input of
// `params` replaced by its slice over `ranks` replicas (same name, shape
// [ceil(n / ranks)]) and a DataParallelGather ("<weight>.gather.forward")
// before its first forward reader and another before its first backward
// reader. A layer's gathers carry its name, so RecomputePass, run later,
// copies a forward gather with the layer it recomputes: the backward gets
// the weight again instead of keeping it. Errors name a weight that is not
// an input of `step`.
Expected<Graph> shardWeights(const Graph &step, const std::set<std::string> &params, int ranks);

} // namespace kiln::parallel
