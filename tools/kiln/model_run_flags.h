// The flags of the commands that run a model on its weights and inputs
// (kiln run, kiln debug compare, overflow and bisect --check accuracy), and
// what they need of each other beyond CLI11's checks.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "compiler/driver/reference_run.h"

namespace kiln::cli {

// MODEL, --weights, --inputs, --training, --loss and --input-shape, as kiln
// run takes them (the debug commands that run a model).
void addModelRunFlags(CLI::App &cmd, driver::ReferenceRunRequest &request);

// --weights unless the model is ONNX (its initializers are its own; a usage
// error, exit 2), then --loss as loss_flags.h checks it (exit 1). 0 when
// they hold; else the exit code, the message printed.
int checkModelRunFlags(const std::string &model, const std::string &weights, bool training,
                       const std::string &loss);

} // namespace kiln::cli
