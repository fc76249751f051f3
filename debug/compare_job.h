// `kiln debug compare` as a library function: a job's model run two ways
// and compared value by value (value_compare.h) — its compiled kernels
// against the reference interpreter, or its fused graph against the graph
// with every fusion it may switch off switched off.
#pragma once

#include <string>

#include "compiler/driver/job.h"
#include "compiler/driver/kernels.h"
#include "compiler/driver/reference_run.h"
#include "debug/value_compare.h"

namespace kiln::debug {

struct CompareJobRequest {
  driver::ReferenceRunRequest run; // the model, its weights and inputs
  driver::KernelSettings cache;
  std::string against = "reference"; // or "unfused"
  double tolerance = -1;             // below 0: compareTolerance(job's dtype)
};

// The default tolerance of a comparison in `dtype`: f32 1e-4, f16 1e-2, bf16 5e-2.
double compareTolerance(DType dtype);

// `job` with every fusion pass and rule it may switch off switched off.
Expected<driver::ResolvedJob> unfusedJob(const driver::ResolvedJob &job);

// The comparison `request` asks for, on `job`; report.against says which.
Expected<CompareReport> compareJob(const CompareJobRequest &request,
                                   const driver::ResolvedJob &job);

} // namespace kiln::debug
