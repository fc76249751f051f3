// Fixes for an overflow, proven on the step: the candidates kiln debug
// overflow tries, and their verdicts against the reference run.
#pragma once

#include <functional>
#include <set>
#include <string>

#include "debug/overflow_locator.h"

namespace kiln::debug {

// The candidates for `report`'s op in `graph` (the graph that ran, with the
// job's passes): keep the op and its producers in f32, keep its module,
// keep everything from it on, AttentionFp32CastPass for its layer (attention
// ops), bf16 mixed precision (when the target has bf16), a smaller loss scale
// (when the graph has a loss_scale input). `names` are the node names the
// job's keep_dtype can name (the graph before passes); others are dropped.
std::vector<FixCandidate> fixCandidates(const Graph &graph, const OverflowReport &report,
                                        const OverflowJob &job, const ops::TensorMap &inputs,
                                        const std::set<std::string> &names);

// A run of compiled kernels: the graph outputs by name, and whether the
// device's float status was raised.
struct StatusRun {
  ops::TensorMap outputs;
  bool overflowed = false;
};
Expected<StatusRun> runWithStatus(const Graph &graph, codegen::CompiledKernels kernels,
                                  const ops::TensorMap &inputs);

// Runs the step with a candidate applied.
using FixTrial = std::function<Expected<StatusRun>(const FixCandidate &)>;

// Tries every candidate of `report.fixes` against `reference` (the outputs of
// the force_fp32 run): a fix is verified when the run raises no float status,
// every float output is finite, and the loss (without a "loss" output: every
// output it shares with the reference, relative to the reference's largest
// magnitude) is within `tolerance` relative of the reference. Sorts the verified ones first,
// smallest error first. A trial that fails to compile or run is recorded, not fatal.
void verifyFixes(OverflowReport &report, const ops::TensorMap &reference, const FixTrial &trial,
                 double tolerance);

} // namespace kiln::debug
