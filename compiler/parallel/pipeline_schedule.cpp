#include "compiler/parallel/pipeline_schedule.h"

#include <algorithm>
#include <map>

namespace kiln::parallel {
namespace {

std::vector<PipelineAction> plainSchedule(int stage, int stages, int micro_batches) {
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

// Megatron's forward_backward_pipelining_with_interleaving, device `rank`.
std::vector<PipelineAction> interleavedSchedule(int rank, int ranks, int micro_batches,
                                                int chunks) {
  const int total = micro_batches * chunks, group = ranks * chunks;
  const int warmup = std::min(2 * (ranks - rank - 1) + (chunks - 1) * ranks, total);
  auto action = [&](int k, bool forward) {
    int chunk = k % group / ranks;
    if (!forward)
      chunk = chunks - 1 - chunk;
    return PipelineAction{chunk * ranks + rank, k / group * ranks + k % ranks, forward};
  };
  std::vector<PipelineAction> actions;
  for (int k = 0; k < warmup; ++k)
    actions.push_back(action(k, true));
  for (int i = 0; i < total - warmup; ++i) {
    actions.push_back(action(warmup + i, true));
    actions.push_back(action(i, false));
  }
  for (int k = total - warmup; k < total; ++k)
    actions.push_back(action(k, false));
  return actions;
}

// What `a` waits for besides its device's previous action; false: nothing.
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

std::vector<PipelineAction> stageSchedule(int rank, int ranks, int micro_batches,
                                          int virtual_stages) {
  return virtual_stages <= 1 ? plainSchedule(rank, ranks, micro_batches)
                             : interleavedSchedule(rank, ranks, micro_batches, virtual_stages);
}

std::vector<PipelineAction> pipelineSchedule(int ranks, int micro_batches, int virtual_stages) {
  const int stages = ranks * std::max(1, virtual_stages);
  std::vector<std::vector<PipelineAction>> lists;
  size_t total = 0;
  for (int r = 0; r < ranks; ++r) {
    lists.push_back(stageSchedule(r, ranks, micro_batches, virtual_stages));
    total += lists.back().size();
  }
  std::vector<size_t> next(ranks, 0);
  std::map<int64_t, bool> done;
  std::vector<PipelineAction> order;
  while (order.size() < total) {
    const size_t before = order.size();
    for (int r = 0; r < ranks; ++r) {
      if (next[r] == lists[r].size())
        continue;
      const PipelineAction &a = lists[r][next[r]];
      PipelineAction on;
      if (dependency(a, stages, on) && !done.count(keyOf(on)))
        continue;
      order.push_back(a);
      done[keyOf(a)] = true;
      ++next[r];
    }
    if (order.size() == before)
      break; // cannot happen for these schedules; never loop forever
  }
  return order;
}

std::vector<ActionTime> simulatePipeline(const std::vector<PipelineAction> &schedule,
                                         const std::vector<double> &seconds, int ranks) {
  std::map<int64_t, double> ended;
  std::map<int, double> free_at;
  int stages = 0;
  for (const PipelineAction &a : schedule)
    stages = std::max(stages, a.stage + 1);
  if (ranks <= 0)
    ranks = std::max(1, stages);
  std::vector<ActionTime> times;
  for (size_t i = 0; i < schedule.size(); ++i) {
    const PipelineAction &a = schedule[i];
    double start = free_at[a.stage % ranks];
    PipelineAction on;
    if (dependency(a, stages, on))
      start = std::max(start, ended[keyOf(on)]);
    const double end = start + (i < seconds.size() ? seconds[i] : 0.0);
    ended[keyOf(a)] = end;
    free_at[a.stage % ranks] = end;
    times.push_back({start, end});
  }
  return times;
}

} // namespace kiln::parallel
