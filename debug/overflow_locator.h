// Finding the first op that overflows: run the compiled step and look at the
// device's float status (ir/float_status.h) and the outputs after every
// kernel, then re-run the first kernel that overflowed op by op on the
// reference interpreter with the kernel's own numerics to name the op, the
// way Ascend's overflow dump (op_debug_mode 3) names it — but before the job
// has run for an hour. Works in both overflow modes: in saturation mode the
// status is the only trace, the stored values being clamped.
//
// The fixes it suggests are verified (overflow_fixes.h): the caller re-runs
// the step with each candidate and only those that give finite outputs
// within tolerance of the force_fp32 run are recommended, best first.
#pragma once

#include <optional>
#include <set>
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
  std::string target;
  bool target_has_bf16 = false;
  bool cube_takes_f32 = true;                 // else keep_dtype cannot hold a matmul in f32
  bool attention_fp32_pass = false;           // AttentionFp32CastPass runs in this job
  std::vector<int64_t> attention_fp32_layers; // empty: every layer
  // The target has FlashAttentionScore but the job does not fuse attention
  // (FlashAttentionFusionPass switched off).
  bool flash_attention_available = false;
};
OverflowJob overflowJobOf(const driver::ResolvedJob &job);

// A number as the reports print it: five significant digits.
std::string reportNumber(double v);

// A fix to try, as an edit of the job, and what re-running the step with it
// gave.
struct FixCandidate {
  std::string description; // what it does, for people
  std::string flags;       // the kiln flags that apply it
  // The edit (empty fields leave the job as it is).
  std::vector<std::string> keep_dtype; // node names kept in their (f32) dtype
  std::string keep_dtype_file;         // where the caller wrote them for --keep-dtype
  std::vector<std::string> enable_passes;
  std::set<int64_t> attention_fp32_layers;
  bool every_attention_layer = false; // AttentionFp32CastPass on every layer
  std::string precision_mode;
  double loss_scale = 0; // a smaller value for the graph's loss_scale input
  // The outcome.
  bool tried = false;
  bool verified = false; // finite, and within tolerance of the reference
  double error = 0;      // largest relative difference from the reference
  std::string outcome;   // why it failed, or the loss it gave
  nlohmann::json toJson() const;
};

struct OverflowReport {
  bool found = false;
  std::string bad_input; // a graph input that already holds inf or NaN
  // The first kernel with a non-finite output, in execution order.
  std::string kernel;
  std::string kernel_kind;
  std::string formed_by;
  int64_t kernel_index = -1;
  int64_t kernels_run = 0;
  // The first op of that kernel that overflowed (its result out of its
  // dtype's range, or the status raised by its rounding), when the re-run
  // with the kernel's numerics reproduces it.
  std::string op_name;
  std::string op;
  bool backward = false;
  bool held_in_f32 = false; // inside an f32 fusion group: it overflows where stored
  std::vector<ValueRange> op_inputs;
  std::vector<ValueRange> op_outputs;
  std::string dump;                     // safetensors with the op's inputs and outputs
  std::vector<std::string> suggestions; // unverified advice (when no fix was tried)
  std::vector<FixCandidate> fixes;      // verified ones first, best first
  std::string reference;                // what the fixes were checked against
  std::string reference_note;           // why that reference, when not force_fp32

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
