#include "tools/kiln/model_run_flags.h"

#include "compiler/frontend/onnx/onnx_import.h"
#include "tools/kiln/cli_common.h"
#include "tools/kiln/job_flags.h"
#include "tools/kiln/loss_flags.h"

namespace kiln::cli {

void addModelRunFlags(CLI::App &cmd, driver::ReferenceRunRequest &request) {
  addModelArgument(cmd, request.model, ModelArgument::AnyModel);
  cmd.add_option("--weights", request.weights_path,
                 "the parameters: a safetensors file, a sharded checkpoint's index, or the model "
                 "folder (an ONNX model's are its initializers; given, they override them)");
  cmd.add_option("--inputs", request.inputs_path,
                 "safetensors with input_ids (i64 [B,S]) and optional labels")
      ->required();
  cmd.add_flag("--training", request.training, "forward and backward");
  addLossFlag(cmd, request.loss);
  addInputShapeFlag(cmd, request.input_shapes);
}

int checkModelRunFlags(const std::string &model, const std::string &weights, bool training,
                       const std::string &loss) {
  if (weights.empty() && !frontend::isOnnxPath(model))
    return usage("--weights is required: " + model +
                 " holds no weights (an ONNX model's initializers are its own)");
  if (Status checked = checkLossFlag(model, training, loss); !checked)
    return fail(checked.error());
  return 0;
}

} // namespace kiln::cli
