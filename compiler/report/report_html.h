// `kiln report`'s page: one self-contained HTML file (inline CSS and SVG,
// no script, no network: a Content-Security-Policy says so to the browser)
// with a section per input, in the order given.
//
//   training log  loss (and evaluation), loss scale (log2), gradient norm,
//                 tokens/s against step; overflow steps as red lines
//   plan          peak memory against tokens/s per device, fitting layouts
//                 green, the others grey, the recommended one ringed, the
//                 device memory a dashed line; the recommended layout's
//                 memory per device by part (bars); the recommended command
//   profile       the top kernels and op types by time, with the pass or
//                 rule that formed each fused kernel
#pragma once

#include <string>
#include <vector>

#include "compiler/report/report_inputs.h"

namespace kiln::report {

std::string trainingSection(const TrainingLog &log);
std::string planSection(const LayoutPlan &plan);
// The `top` longest kernels and op types.
std::string profileSection(const Profile &profile, size_t top = 15);

std::string renderReport(const std::vector<ReportInput> &inputs,
                         const std::string &title = "kiln report");

} // namespace kiln::report
