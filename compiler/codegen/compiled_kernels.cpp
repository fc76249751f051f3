#include "compiler/codegen/compiled_kernels.h"

#include <algorithm>
#include <map>

namespace kiln::codegen {

executable::KernelLaunch launchOf(const KernelProgram &program) {
  executable::KernelLaunch launch;
  launch.rows = program.rows();
  if (!program.outputs.empty()) {
    // A row's work: its elements in the first output, or in an input laid
    // out by the same rows where that is more (a reduction's row reads more
    // than it writes: the loss reads a vocabulary per token and writes one
    // partial). The runtime sizes its tiles by it.
    const Shape &rows = program.stages[program.outputs[0].rowStage()].shape;
    const auto rank = static_cast<size_t>(program.outer_rank);
    auto rowElements = [&](const Shape &s) {
      int64_t n = 1;
      for (size_t d = rank; d < s.size(); ++d)
        n *= s[d];
      return n;
    };
    launch.row_elements = rowElements(rows);
    for (const TensorType &input : program.inputs)
      if (input.shape.size() > rank &&
          std::equal(rows.begin(), rows.begin() + rank, input.shape.begin()))
        launch.row_elements = std::max(launch.row_elements, rowElements(input.shape));
    launch.row_elements = std::max<int64_t>(1, launch.row_elements);
  }
  launch.scratch_elements_per_row = program.scratchElementsPerRow();
  launch.accumulator_row_local = program.accumulatorIsRowLocal();
  launch.output_is_accumulator = program.storesAccumulatorAsIs();
  for (const StoredOutput &o : program.outputs)
    launch.row_sums.push_back(o.row_sum_stage >= 0);
  return launch;
}

nlohmann::json KernelStats::toJson() const {
  return {{"total", total},
          {"unique", unique},
          {"compiled", compiled},
          {"cache_hits", cache_hits},
          {"seconds", seconds}};
}

nlohmann::json KernelFallback::toJson() const {
  nlohmann::json j = why.toJson();
  j["action"] = action;
  return j;
}

namespace {

// Each distinct (diagnostic, note) in full once, then the kernels like it:
// identical layers fail identically.
std::string
describeAlike(const std::vector<std::pair<const KernelDiagnostic *, std::string>> &items) {
  std::map<std::string, std::vector<size_t>> alike;
  std::vector<std::string> order;
  for (size_t i = 0; i < items.size(); ++i) {
    const KernelDiagnostic &d = *items[i].first;
    const std::string what = d.code + d.kind + d.formed_by + d.constraint + items[i].second;
    if (alike[what].empty())
      order.push_back(what);
    alike[what].push_back(i);
  }
  std::string s;
  for (const std::string &what : order) {
    const std::vector<size_t> &group = alike[what];
    const auto &[first, note] = items[group.front()];
    s += "\n" + first->toString();
    if (!note.empty())
      s += "\n  fallback: " + note;
    if (group.size() == 1)
      continue;
    s += "\n  and " + std::to_string(group.size() - 1) + " more kernel" +
         (group.size() == 2 ? "" : "s") + " like it:";
    for (size_t i = 1; i < group.size() && i <= 3; ++i)
      s += " '" + items[group[i]].first->kernel + "'";
    if (group.size() > 4)
      s += " ...";
  }
  return s;
}

} // namespace

std::string KernelCompileFailure::message() const {
  std::vector<std::pair<const KernelDiagnostic *, std::string>> items;
  for (const KernelDiagnostic &d : diagnostics)
    items.emplace_back(&d, "");
  return std::to_string(diagnostics.size()) + " kernel" + (diagnostics.size() == 1 ? "" : "s") +
         " cannot be built for the target:" + describeAlike(items);
}

std::string fallbackSummary(const std::vector<KernelFallback> &fallbacks) {
  std::vector<std::pair<const KernelDiagnostic *, std::string>> items;
  for (const KernelFallback &f : fallbacks)
    items.emplace_back(&f.why, f.action);
  return std::to_string(fallbacks.size()) + " kernel" + (fallbacks.size() == 1 ? "" : "s") +
         " fell back:" + describeAlike(items);
}

} // namespace kiln::codegen
