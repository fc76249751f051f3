// `kiln debug bisect` as a library function: the job's switchable passes
// as candidates, a trial's failure tested the way the check asks (the
// kernels that cannot be built for the target, or outputs beyond a
// tolerance of a reference run), and bisect() (bisect.h) narrowing it down.
#pragma once

#include <string>

#include "compiler/driver/compile.h"
#include "compiler/driver/job.h"
#include "compiler/driver/kernels.h"
#include "debug/bisect.h"

namespace kiln::debug {

struct BisectJobRequest {
  driver::ModelRequest model;
  driver::KernelSettings cache;
  // False: a trial fails when a kernel the job's own failure names (by its
  // code) cannot be built for the target. True: when an output differs by
  // more than `tolerance` from the reference run, which needs `weights`
  // and `inputs`.
  bool accuracy = false;
  std::string weights, inputs;
  double tolerance = 1e-2;
};

// Bisects `job` for `request`'s failure. The accuracy reference is the run
// with every candidate off when it is finite (then only passes can make a
// difference), else that run under force_fp32; a reference that is itself
// inf or NaN is an error (it would make a fix look like the culprit). When
// the job's own outputs are not finite, the result's next step points to
// `kiln debug overflow`.
Expected<BisectResult> bisectJob(const BisectJobRequest &request, const driver::ResolvedJob &job);

} // namespace kiln::debug
