// NaN and inf in weights read by train, merge and run (finite_weights.h).
#include "compiler/driver/finite_weights.h"

#include <spdlog/spdlog.h>

#include "ir/finite_values.h"

namespace kiln::driver {

Status checkFiniteWeights(const std::map<std::string, Tensor> &tensors, const std::string &file,
                          NonFiniteWeights policy) {
  switch (policy) {
  case NonFiniteWeights::RefuseToTrain:
    return refuseNonFinite(tensors, file, kTrainingNeedsFiniteValues);
  case NonFiniteWeights::RefuseToMerge:
    return refuseNonFinite(tensors, file,
                           "the merged model would hold it; merge weights and an adapter that are "
                           "finite");
  case NonFiniteWeights::Report: {
    const std::string bad = describeNonFinite(nonFiniteTensors(tensors), file);
    if (!bad.empty())
      spdlog::warn("{}; running anyway (kiln train and kiln merge refuse it)", bad);
    return Status::ok();
  }
  }
  return Status::ok();
}

TensorFileCheck finiteWeightsCheck(NonFiniteWeights policy) {
  return [policy](const std::string &file, const std::map<std::string, Tensor> &tensors) {
    return checkFiniteWeights(tensors, file, policy);
  };
}

} // namespace kiln::driver
