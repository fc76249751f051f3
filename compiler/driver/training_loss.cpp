#include "compiler/driver/training_loss.h"

#include "compiler/autodiff/training_step.h"
#include "compiler/frontend/onnx/onnx_errors.h"

namespace kiln::driver {

Expected<std::string> trainingLoss(const frontend::LoadedModel &model, const std::string &path,
                                   const std::string &requested) {
  if (!model.onnx) {
    if (!requested.empty())
      return Error("--loss '" + requested + "': " + path +
                   " is not an ONNX model; its training step differentiates its own 'loss' "
                   "output (drop --loss)");
    return std::string("loss");
  }
  if (requested.empty()) {
    std::string outputs;
    for (const GraphOutput &out : model.graph.outputs())
      outputs += (outputs.empty() ? "" : ", ") + out.name;
    return Error(path +
                 ": training an ONNX model needs --loss NAME, the scalar output to "
                 "differentiate (its outputs: " +
                 outputs + ")")
        .withCode(frontend::onnx_import::kErrOnnxLoss);
  }
  Expected<ValueId> loss = autodiff::lossOutput(model.graph, requested);
  if (!loss)
    return Error(path + ": --loss '" + requested + "': " + loss.error().message())
        .withCode(frontend::onnx_import::kErrOnnxLoss);
  return requested;
}

} // namespace kiln::driver
