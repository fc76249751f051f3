// What `kiln train --compile-only` prints of a compiled training program: the
// layout, the per-device peak and where its bytes go, the literature's
// figure for the same layout, whether it fits, the largest buffers, and
// when it does not fit the switches that would lower it.
#pragma once

#include <cstdint>
#include <string>

#include "compiler/driver/training.h"
#include "compiler/frontend/decoder_config.h"

namespace kiln::driver {

// "(8 per replica)", or with micro-batches "(8 per replica: 2 per micro-batch, 4 micro-batches)".
std::string batchSplit(const parallel::TrainingProgram &program);

// The report of `program`, compiled from `model` with `job` for `layout`,
// against devices of `capacity` bytes. Planning the switches that would
// lower a plan that does not fit compiles each (layout_suggestions.h).
std::string planReport(const ModelRequest &model, const ResolvedJob &job,
                       const KernelSettings &settings, const parallel::ParallelConfig &layout,
                       const frontend::DecoderConfig &config,
                       const parallel::TrainingProgram &program, int64_t capacity);

} // namespace kiln::driver
