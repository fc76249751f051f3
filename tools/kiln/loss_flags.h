// --loss NAME, with --training: the scalar output of an ONNX model that its
// training differentiates (an exported model's outputs are named by its
// author; a Hugging Face decoder and a kiln graph train on their "loss").
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "support/error.h"

namespace kiln::cli {

void addLossFlag(CLI::App &cmd, std::string &loss);

// --loss goes with --training and an ONNX model, and an ONNX model's
// --training needs it: a usage error (exit 2) otherwise, before the model is
// read. Whether NAME is a scalar float output is the driver's to say
// (driver/training_loss.h).
Status checkLossFlag(const std::string &model, bool training, const std::string &loss);

} // namespace kiln::cli
