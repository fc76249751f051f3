// What `kiln report` reads: the files kiln already writes, each recognised
// by its content, never by its name.
//
//   a folder holding op_summary.csv             a --profile folder (docs/profiling.md)
//   a JSON document with "candidates"           kiln plan --format json
//   JSON lines whose objects have step and loss kiln train --log-json
//
// Anything else is an error naming the file.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/error.h"

namespace kiln::report {

// One line of a --log-json file; a value the trainer wrote as null (a NaN
// loss, the gradient norm of an overflow step) is absent.
struct TrainingStep {
  int64_t step = 0;
  std::optional<double> loss, loss_scale, grad_norm, lr, tokens_per_s;
  bool overflow = false;
  // Evaluation fields a line may carry ("eval_loss", "val_loss", ...).
  std::map<std::string, double> eval;
};

struct TrainingLog {
  std::string source;
  std::vector<TrainingStep> steps;
};

struct PlanCandidate {
  std::string flags; // the layout as kiln train's flags
  int64_t peak_bytes = 0;
  double tokens_per_s_per_device = 0;
  bool fits = false;
  bool recommended = false;
  std::string reason; // why it does not fit
  // What one device holds at the peak, by part ("weights", "optimizer
  // state", ...), and whether the peak is the step's or the update's.
  std::vector<std::pair<std::string, int64_t>> memory;
  std::string memory_at;
};

struct LayoutPlan {
  std::string source, target, command;
  int64_t device_memory = 0, devices = 0;
  std::vector<PlanCandidate> candidates;
};

// Time summed over every step and device of a profile.
struct TimedEntry {
  std::string name, op_type, task_type, formed_by; // formed_by: the pass of a fused kernel
  int64_t count = 0;
  double total_us = 0;
};

struct Profile {
  std::string source;
  std::vector<TimedEntry> kernels;  // by Op Name, device kernels only, longest first
  std::vector<TimedEntry> op_types; // by OP Type, everything the step timed, longest first
  double total_us = 0;              // every row
  int64_t steps = 0, devices = 0;
};

using ReportInput = std::variant<TrainingLog, LayoutPlan, Profile>;

// Reads `path` and recognises it; an error names the file and what kiln
// expected of it.
Expected<ReportInput> readReportInput(const std::string &path);
// Each of `paths` in order (`kiln report`'s sections); the first error.
Expected<std::vector<ReportInput>> readReportInputs(const std::vector<std::string> &paths);

// RFC 4180 rows, as runtime/profiler.cpp writes them: a quoted field may
// hold commas and doubled quotes; no field holds a newline. Empty lines are
// skipped.
std::vector<std::vector<std::string>> csvRows(std::string_view text);

// The readers behind it, for tests: `source` names the input in errors.
Expected<TrainingLog> parseTrainingLog(std::string_view text, const std::string &source);
Expected<LayoutPlan> parseLayoutPlan(const nlohmann::json &plan, const std::string &source);
// op_summary.csv's text, and fusion_op.csv's (empty when the folder has none).
Expected<Profile> parseProfile(std::string_view op_summary, std::string_view fusion_op,
                               const std::string &source);

} // namespace kiln::report
