// `kiln debug overflow` as a library function: a job's step compiled and
// run until the first op that overflows (overflow_locator.h), then re-run
// with each fix the locator proposes, each verified against a reference
// (overflow_fixes.h).
#pragma once

#include <string>

#include "compiler/driver/job.h"
#include "compiler/driver/kernels.h"
#include "compiler/driver/reference_run.h"
#include "debug/overflow_locator.h"

namespace kiln::debug {

struct OverflowJobRequest {
  driver::ReferenceRunRequest run; // the model, its weights and inputs
  driver::KernelSettings cache;
  std::string dump_dir;    // the overflowing op's tensors and the fixes' keep_dtype files
  bool verify = true;      // re-run the step with each fix
  double tolerance = 1e-2; // a fix's loss within this relative distance of the reference
};

// Locates the first overflow of `job`'s run and, when `request.verify`,
// verifies the fixes for it. The reference is the job's force_fp32 run;
// where that overflows too (a cube that takes only f16 inputs), the exact
// f32 run. A fix of the keep_dtype kind is written as a --keep-dtype file
// (with the job's own keep_dtype lines) into the dump folder.
Expected<OverflowReport> locateJobOverflow(const OverflowJobRequest &request,
                                           const driver::ResolvedJob &job);

} // namespace kiln::debug
