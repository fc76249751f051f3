// What each command does with NaN or inf in the weights, adapters and
// optimizer state it reads (ir/finite_values.h): training and merging refuse
// the file, naming it (the shard, for a sharded checkpoint), the tensor and
// the first bad element; a run warns and goes on, since the user may be
// debugging the overflow that wrote them.
#pragma once

#include <map>
#include <string>

#include "formats/hf_checkpoint.h"
#include "ir/tensor.h"
#include "support/error.h"

namespace kiln::driver {

enum class NonFiniteWeights { RefuseToTrain, RefuseToMerge, Report };

// `tensors`, read from `file`, as `policy` treats them: an error (refusing)
// or a warning line (reporting) when one holds a NaN or inf.
Status checkFiniteWeights(const std::map<std::string, Tensor> &tensors, const std::string &file,
                          NonFiniteWeights policy);

// The same, for readHfWeights to apply to each file (shard) as it reads it.
TensorFileCheck finiteWeightsCheck(NonFiniteWeights policy);

} // namespace kiln::driver
