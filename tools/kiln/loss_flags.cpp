#include "tools/kiln/loss_flags.h"

#include "compiler/frontend/onnx/onnx_import.h"
#include "tools/kiln/cli_common.h"

namespace kiln::cli {

void addLossFlag(CLI::App &cmd, std::string &loss) {
  cmd.add_option("--loss", loss,
                 "NAME: with --training, the scalar output of an ONNX model to differentiate "
                 "(grad.<initializer> for every float initializer)");
}

Status checkLossFlag(const std::string &model, bool training, const std::string &loss) {
  const bool onnx = frontend::isOnnxPath(model);
  if (!loss.empty() && !onnx)
    return usageError("--loss '" + loss + "': " + model +
                      " is not an ONNX model; its training step differentiates its own 'loss' "
                      "output (drop --loss)");
  if (!loss.empty() && !training)
    return usageError("--loss '" + loss +
                      "' names the output --training differentiates: add --training");
  if (training && onnx && loss.empty())
    return usageError("--training: " + model +
                      " is an ONNX model; say which scalar output to differentiate with --loss "
                      "NAME");
  return Status::ok();
}

} // namespace kiln::cli
