// What buildDecoderForward accepts of its options for a config: the dtype,
// the sequence and batch, and the tensor-parallel layout (heads and MLP
// columns split evenly, key/value heads split or replicated, sequence
// parallelism's equal slices).
#pragma once

#include "compiler/frontend/decoder_config.h"
#include "compiler/frontend/decoder_model.h"
#include "support/error.h"

namespace kiln::frontend {

// The config itself, then `options` against it; errors name the model.
Status checkForwardOptions(const DecoderConfig &config, const ModelOptions &options);

} // namespace kiln::frontend
