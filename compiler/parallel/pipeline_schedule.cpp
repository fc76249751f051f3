#include "compiler/parallel/pipeline_schedule.h"

#include <algorithm>
#include <map>

namespace kiln::parallel {

std::vector<PipelineAction> stageSchedule(int stage, int stages, int micro_batches) {
  const int warmup = std::min(stages - stage - 1, micro_batches);
  std::vector<PipelineAction> actions;
  for (int m = 0; m < warmup; ++m)
    actions.push_back({stage, m, true});
  for (int i = 0; i < micro_batches - warmup; ++i) {
    actions.push_back({stage, warmup + i, true});
    actions.push_back({stage, i, false});
  }
  for (int m = micro_batches - warmup; m < micro_batches; ++m)
    actions.push_back({stage, m, false});
  return actions;
}

namespace {

// What `a` waits for besides its stage's previous action; false: nothing.
bool dependency(const PipelineAction &a, int stages, PipelineAction &on) {
  if (a.forward && a.stage > 0)
    on = {a.stage - 1, a.micro, true};
  else if (!a.forward && a.stage + 1 < stages)
    on = {a.stage + 1, a.micro, false};
  else
    return false;
  return true;
}

int64_t keyOf(const PipelineAction &a) {
  return (int64_t{a.stage} << 33) | (int64_t{a.micro} << 1) | (a.forward ? 1 : 0);
}

} // namespace

std::vector<PipelineAction> pipelineSchedule(int stages, int micro_batches) {
  std::vector<std::vector<PipelineAction>> lists;
  size_t total = 0;
  for (int s = 0; s < stages; ++s) {
    lists.push_back(stageSchedule(s, stages, micro_batches));
    total += lists.back().size();
  }
  std::vector<size_t> next(stages, 0);
  std::map<int64_t, bool> done;
  std::vector<PipelineAction> order;
  while (order.size() < total) {
    const size_t before = order.size();
    for (int s = 0; s < stages; ++s) {
      if (next[s] == lists[s].size())
        continue;
      const PipelineAction &a = lists[s][next[s]];
      PipelineAction on;
      if (dependency(a, stages, on) && !done.count(keyOf(on)))
        continue;
      order.push_back(a);
      done[keyOf(a)] = true;
      ++next[s];
    }
    if (order.size() == before)
      break; // cannot happen for 1F1B; never loop forever
  }
  return order;
}

std::vector<ActionTime> simulatePipeline(const std::vector<PipelineAction> &schedule,
                                         const std::vector<double> &seconds) {
  std::map<int64_t, double> ended;
  std::map<int, double> free_at;
  int stages = 0;
  for (const PipelineAction &a : schedule)
    stages = std::max(stages, a.stage + 1);
  std::vector<ActionTime> times;
  for (size_t i = 0; i < schedule.size(); ++i) {
    const PipelineAction &a = schedule[i];
    double start = free_at[a.stage];
    PipelineAction on;
    if (dependency(a, stages, on))
      start = std::max(start, ended[keyOf(on)]);
    const double end = start + (i < seconds.size() ? seconds[i] : 0.0);
    ended[keyOf(a)] = end;
    free_at[a.stage] = end;
    times.push_back({start, end});
  }
  return times;
}

} // namespace kiln::parallel
