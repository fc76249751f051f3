// `kiln debug reduce` as a library function: a model whose kernels cannot
// be built for the target shrunk (graph_reducer.h) to a small graph that
// fails the same way, written as a reproducer folder (repro.h) and read
// back to check it still fails so.
#pragma once

#include <string>
#include <vector>

#include "compiler/codegen/kernel_diagnostic.h"
#include "compiler/driver/compile.h"
#include "compiler/driver/job.h"
#include "debug/graph_reducer.h"

namespace kiln::debug {

// What "the same failure" means: a kernel with the first failure's code,
// kind and forming pass. Node names and numbers may change as it shrinks.
struct FailureSignature {
  std::string code, kind, formed_by;

  bool matches(const std::vector<codegen::KernelDiagnostic> &failures) const;
  std::string toString() const; // "E40001 in a rms_norm kernel formed by RmsNormFusionPass"
};

struct ReduceJobResult {
  FailureSignature signature;
  std::string reduction;        // "49 nodes to 3 in 120 trials"
  std::vector<std::string> log; // one line per accepted edit
};

// Shrinks `model` of `job` (its first kernel failure kept) in at most
// `max_trials` trials and writes the reproducer into `output`. A job whose
// kernels all fit is an error, and so is a written folder that no longer
// fails the same way (a bug in the reducer).
Expected<ReduceJobResult> reduceJob(const driver::ModelRequest &model,
                                    const driver::ResolvedJob &job, const std::string &output,
                                    int max_trials = 5000);

} // namespace kiln::debug
