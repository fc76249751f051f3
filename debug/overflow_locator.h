// Finding the first op that overflows: run the compiled step with a finite
// check after every kernel, then re-run the first kernel with an inf or NaN
// in its outputs op by op on the reference interpreter to name the op, the
// way Ascend's overflow dump (op_debug_mode 3) names it — but before the job
// has run for an hour.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/codegen/kernel_compiler.h"
#include "compiler/driver/job.h"
#include "ir/graph.h"
#include "ops/interpreter.h"

namespace kiln::debug {

// What a tensor holds: its finite range and how many elements are not finite.
struct ValueRange {
  std::string name;
  TensorType type;
  double min = 0, max = 0; // over finite elements
  int64_t nan = 0, inf = 0;
  bool finite() const { return nan == 0 && inf == 0; }
  nlohmann::json toJson() const;
};
ValueRange rangeOf(const std::string &name, const Tensor &t);

// The job facts the suggestions depend on.
struct OverflowJob {
  std::string precision_mode;
  OverflowMode overflow = OverflowMode::InfNan;
  bool attention_fp32_pass = false;           // AttentionFp32CastPass runs in this job
  std::vector<int64_t> attention_fp32_layers; // empty: every layer
};
OverflowJob overflowJobOf(const driver::ResolvedJob &job);

struct OverflowReport {
  bool found = false;
  std::string bad_input; // a graph input that already holds inf or NaN
  // The first kernel with a non-finite output, in execution order.
  std::string kernel;
  std::string kernel_kind;
  std::string formed_by;
  int64_t kernel_index = -1;
  int64_t kernels_run = 0;
  // The first op of that kernel with a non-finite output, when the reference
  // re-run reproduces it.
  std::string op_name;
  std::string op;
  bool backward = false;
  std::vector<ValueRange> op_inputs;
  std::vector<ValueRange> op_outputs;
  std::string dump; // safetensors with the op's inputs and outputs
  std::vector<std::string> suggestions;

  nlohmann::json toJson() const;
  std::string toText() const;
};

struct OverflowOptions {
  std::string dump_dir; // empty: no dump
};

// Runs `graph`'s compiled `kernels` on `inputs`. A missing input or a failed
// load is an error; finding an overflow is not.
Expected<OverflowReport> locateOverflow(const Graph &graph, codegen::CompiledKernels kernels,
                                        const ops::TensorMap &inputs, const OverflowJob &job,
                                        const OverflowOptions &options = {});

} // namespace kiln::debug
