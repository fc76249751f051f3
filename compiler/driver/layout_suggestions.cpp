#include "compiler/driver/layout_suggestions.h"

#include <optional>

#include "support/progress.h"

namespace kiln::driver {
namespace {

using passes::RecomputeMode;

// What the suggestions change.
struct Switches {
  RecomputeMode recompute = RecomputeMode::None;
  parallel::ParallelConfig layout;
};

// The flags that turn `from` into `to`.
std::string flagsOf(const Switches &from, const Switches &to) {
  std::string flags;
  auto add = [&](const std::string &f) { flags += (flags.empty() ? "" : " ") + f; };
  if (to.layout.tp != from.layout.tp)
    add("--tp " + std::to_string(to.layout.tp));
  if (to.layout.zero != from.layout.zero)
    add("--zero " + std::to_string(to.layout.zero));
  if (to.recompute != from.recompute)
    add("--recompute " + std::string(passes::recomputeModeName(to.recompute)));
  if (to.layout.grad_accum != from.layout.grad_accum)
    add("--grad-accum " + std::to_string(to.layout.grad_accum));
  if (from.layout.weight_copies && !to.layout.weight_copies)
    add("--no-weight-copies");
  return flags;
}

// One switch more than `s`, each way there is.
std::vector<Switches> nextTo(const Switches &s, int64_t batch) {
  std::vector<Switches> next;
  for (RecomputeMode mode : {RecomputeMode::Selective, RecomputeMode::Full})
    if (static_cast<int>(mode) > static_cast<int>(s.recompute)) {
      Switches n = s;
      n.recompute = mode;
      next.push_back(n);
    }
  if (s.layout.dp > 1 && s.layout.zero < 2) {
    Switches n = s;
    n.layout.zero = 2;
    next.push_back(n);
  }
  if (s.layout.dp % 2 == 0) {
    Switches n = s;
    n.layout.tp *= 2;
    n.layout.dp /= 2;
    next.push_back(n);
  }
  // Mixed precision's weight copies are kept only without ZeRO; where the
  // update sets the peak, casting in the step instead lowers it.
  if (s.layout.weight_copies && s.layout.zero == 0) {
    Switches n = s;
    n.layout.weight_copies = false;
    next.push_back(n);
  }
  const int64_t per_replica = batch / s.layout.dp;
  if (per_replica > s.layout.grad_accum) {
    Switches n = s;
    n.layout.grad_accum = static_cast<int>(per_replica);
    next.push_back(n);
  }
  return next;
}

} // namespace

std::vector<LayoutSuggestion> suggestLayouts(const ModelRequest &model, const ResolvedJob &job,
                                             const KernelSettings &settings,
                                             const parallel::ParallelConfig &layout, int64_t peak,
                                             int64_t capacity) {
  const Switches given{passes::recomputeSettings(*job.context).mode, layout};
  int planned = 0;
  // The plan of `s`; nothing when the model or the batch cannot take it.
  auto plan = [&](const Switches &s) -> std::optional<LayoutSuggestion> {
    progress::report("planning the switches that would lower the peak: " +
                     std::to_string(planned++) + " planned");
    auto checked =
        parallel::resolveParallelConfig(s.layout.devices, s.layout.dp, s.layout.tp, s.layout.zero,
                                        model.batch, s.layout.grad_accum, s.layout.pp);
    if (!checked ||
        !parallel::setPipelineShape(*checked, s.layout.virtual_stages, s.layout.stage_layers))
      return std::nullopt;
    checked->sequence_parallel = s.layout.sequence_parallel;
    checked->weight_copies = s.layout.weight_copies;
    auto program =
        compileTrainingProgram(model, withRecompute(job, s.recompute), settings, *checked);
    if (!program)
      return std::nullopt; // e.g. the heads do not split that many ways
    return LayoutSuggestion{flagsOf(given, s), program->memory.peak,
                            program->memory.peak <= capacity};
  };
  // Each switch alone, then switches added one at a time, the one that
  // lowers the peak most first, until the plan fits or nothing lowers it.
  std::vector<LayoutSuggestion> out;
  for (const Switches &n : nextTo(given, model.batch))
    if (std::optional<LayoutSuggestion> s = plan(n); s && s->peak < peak)
      out.push_back(*s);
  Switches current = given;
  int64_t current_peak = peak;
  for (int added = 0; current_peak > capacity; ++added) {
    std::optional<std::pair<Switches, LayoutSuggestion>> best;
    for (const Switches &n : nextTo(current, model.batch))
      if (std::optional<LayoutSuggestion> s = plan(n);
          s && s->peak < current_peak && (!best || s->peak < best->second.peak))
        best.emplace(n, *s);
    if (!best)
      break;
    current = best->first;
    current_peak = best->second.peak;
    if (added > 0) // a single switch is listed above already
      out.push_back(best->second);
  }
  return out;
}

} // namespace kiln::driver
