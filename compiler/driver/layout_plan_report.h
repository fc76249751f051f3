// What `kiln plan` prints of a layout plan: a table of the best layouts that
// fit, the nearest that do not and why, the kiln train command for the
// best, and when nothing fits what would; or all of it as JSON.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "compiler/driver/layout_planner.h"

namespace kiln::driver {

// What the user fills in the printed command: the token file and the steps.
inline constexpr const char *kTokensPlaceholder = "--data TOKENS";
inline constexpr const char *kStepsPlaceholder = "--steps N";

// `kiln train MODEL --data TOKENS --steps N --devices D --batch B --seq S
// --dtype DT --target T --device-memory X <the candidate's flags>[ --lora-rank
// R]`, the memory as the user wrote it.
std::string trainCommand(const PlanRequest &request, const ResolvedJob &job,
                         const LayoutCandidate &candidate);

// The text report: `shown` layouts that fit and `shown` that do not.
std::string layoutPlanToText(const PlanRequest &request, const ResolvedJob &job,
                             const LayoutPlan &plan, int shown = 5);

// {"recommended": {...} or null, "command", "candidates": [{"dp", "tp", "pp",
// "zero", "recompute", "micro_batches", "micro_batch_size", "grad_accum",
// "peak_bytes", "fits", "step_time_s", "tokens_per_s_per_device",
// "reason"}], "would_fit", "nodes", "device_memory", "unconfirmed"}.
nlohmann::json layoutPlanToJson(const PlanRequest &request, const ResolvedJob &job,
                                const LayoutPlan &plan);

} // namespace kiln::driver
