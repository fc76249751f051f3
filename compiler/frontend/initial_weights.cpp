#include "compiler/frontend/initial_weights.h"

#include <climits>
#include <new>

#include "compiler/frontend/decoder_init.h"
#include "compiler/frontend/random_init.h"
#include "ir/shape.h"
#include "support/byte_size.h"

namespace kiln::frontend {

int64_t parameterBytes(const Graph &graph) {
  int64_t bytes = 0;
  for (const GraphInput &in : graph.inputs())
    if (in.role == InputRole::Parameter)
      bytes = saturatingAdd(bytes, checkedByteSize(graph.type(in.value)).value_or(INT64_MAX));
  return bytes;
}

Expected<std::map<std::string, Tensor>> initialWeights(const LoadedModel &model,
                                                       const std::string &source, uint64_t seed,
                                                       double std_dev,
                                                       const std::vector<WeightScale> &scales) {
  std::map<std::string, Tensor> weights;
  try {
    if (model.onnx) // an ONNX model's weights are its initializers
      weights = model.weights;
    else
      weights = model.config ? initDecoderWeights(*model.config, seed)
                             : randomGraphInputs(model.graph, InputRole::Parameter, seed, std_dev);
  } catch (const std::bad_alloc &) {
    return Error(source + ": its weights need " + formatBytes(parameterBytes(model.graph)) +
                 " in f32, more memory than this machine has");
  }
  for (const WeightScale &scale : scales)
    KILN_RETURN_IF_ERROR(scaleWeights(weights, scale.pattern, scale.factor));
  return weights;
}

} // namespace kiln::frontend
