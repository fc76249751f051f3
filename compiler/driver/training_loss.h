// Which output a model's training step differentiates: a Hugging Face
// decoder's and a kiln graph's own "loss"; for an ONNX model the scalar
// output --loss names (an exported model's outputs are whatever its author
// called them).
#pragma once

#include <string>

#include "compiler/frontend/model_loader.h"
#include "support/error.h"

namespace kiln::driver {

// The loss output of `model` (read from `path`) for `requested` (--loss, ""
// when not given). Errors name `path`: --loss on a model that is not ONNX,
// and (code E12030, listing the model's outputs) an ONNX model without
// --loss or whose NAME is not a scalar float output.
Expected<std::string> trainingLoss(const frontend::LoadedModel &model, const std::string &path,
                                   const std::string &requested);

} // namespace kiln::driver
