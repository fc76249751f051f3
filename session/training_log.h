// The --log-json file of a training run: one JSON line per step.
#pragma once

#include <cstdint>
#include <string>

#include "support/error.h"

namespace kiln::session {

// Keeps the lines of the log at `path` up to step `steps_done`: a run
// killed after logging a step and before its checkpoint redoes that step
// when resumed and logs it again. Lines that are not JSON objects (one cut
// short by the kill) go with the redone steps' lines. The file is rewritten
// atomically, and only when a line goes; a missing file is fine.
Status keepLogUpTo(const std::string &path, int64_t steps_done);

} // namespace kiln::session
