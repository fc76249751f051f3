// Greedy-by-size arena planning (algorithm in memory_plan.h).
#include "executable/memory_plan.h"

#include <algorithm>
#include <climits>
#include <numeric>

#include "ir/shape.h"

namespace kiln::executable {

// Sums of sizes saturate at INT64_MAX (ir/shape.h): a plan past it is
// refused by its size, never wrapped into a small one.
int64_t BufferPlacement::alignedBytes(int64_t alignment) const {
  if (bytes > INT64_MAX - alignment)
    return INT64_MAX;
  return (bytes + alignment - 1) / alignment * alignment;
}

MemoryPlan planMemory(const Graph &graph, const std::vector<KernelSpec> &kernels, int64_t alignment,
                      const Lifetimes &lifetimes) {
  constexpr int kUnset = INT_MIN;
  const int n = static_cast<int>(kernels.size());
  std::vector<int> first(graph.numValues(), kUnset), last(graph.numValues(), kUnset);
  for (const GraphInput &in : graph.inputs())
    first[in.value] = last[in.value] = -1;
  for (int k = 0; k < n; ++k) {
    for (ValueId v : kernels[k].inputs) {
      if (first[v] == kUnset) // read but never written: a malformed partition, plan it anyway
        first[v] = k;
      last[v] = std::max(last[v], k);
    }
    for (ValueId v : kernels[k].outputs) {
      if (first[v] == kUnset)
        first[v] = k;
      last[v] = std::max(last[v], k);
    }
  }
  for (const GraphOutput &out : graph.outputs())
    if (first[out.value] != kUnset && !(lifetimes.output_leaves && lifetimes.output_leaves(out)))
      last[out.value] = n;
  if (lifetimes.input_stays)
    for (const GraphInput &in : graph.inputs())
      if (lifetimes.input_stays(in))
        last[in.value] = n;
  // An alias lends its lifetime to the buffer it reads (aliases of aliases
  // resolve in execution order) and takes none of its own.
  std::vector<ValueId> root(graph.numValues());
  std::iota(root.begin(), root.end(), ValueId{0});
  for (const KernelSpec &k : kernels)
    if (aliasesItsInput(graph, k))
      root[k.outputs.front()] = root[k.inputs.front()];
  for (ValueId v = 0; v < static_cast<ValueId>(graph.numValues()); ++v) {
    const ValueId r = root[v];
    if (r == v || first[v] == kUnset)
      continue;
    first[r] = std::min(first[r], first[v]);
    last[r] = std::max(last[r], last[v]);
    first[v] = kUnset;
  }
  if (lifetimes.input_outside)
    for (const GraphInput &in : graph.inputs())
      if (lifetimes.input_outside(in))
        first[in.value] = kUnset;

  MemoryPlan plan;
  plan.alignment = alignment;
  plan.kernels = n;
  for (ValueId v = 0; v < static_cast<ValueId>(graph.numValues()); ++v) {
    if (first[v] == kUnset)
      continue;
    const TensorType &type = graph.type(v);
    plan.buffers.push_back({graph.valueName(v),
                            type.numElements() * static_cast<int64_t>(dtypeSize(type.dtype)), 0,
                            first[v], last[v]});
  }

  std::vector<size_t> order(plan.buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const BufferPlacement &x = plan.buffers[a], &y = plan.buffers[b];
    if (x.bytes != y.bytes)
      return x.bytes > y.bytes;
    return x.first < y.first;
  });
  std::vector<size_t> placed; // by offset, so each gap search is one pass
  for (size_t index : order) {
    BufferPlacement &b = plan.buffers[index];
    const int64_t size = b.alignedBytes(alignment);
    int64_t cursor = 0, best = -1, best_gap = INT64_MAX;
    for (size_t p : placed) {
      const BufferPlacement &c = plan.buffers[p];
      if (!c.liveWith(b))
        continue;
      const int64_t gap = c.offset - cursor;
      if (gap >= size && gap < best_gap) {
        best = cursor;
        best_gap = gap;
      }
      cursor = std::max(cursor, saturatingAdd(c.offset, c.alignedBytes(alignment)));
    }
    b.offset = best >= 0 ? best : cursor;
    placed.insert(std::upper_bound(placed.begin(), placed.end(), index,
                                   [&](size_t x, size_t y) {
                                     return plan.buffers[x].offset < plan.buffers[y].offset;
                                   }),
                  index);
    plan.peak_bytes = std::max(plan.peak_bytes, saturatingAdd(b.offset, size));
    plan.total_bytes = saturatingAdd(plan.total_bytes, size);
  }
  return plan;
}

Status verifyMemoryPlan(const MemoryPlan &plan) {
  if (plan.alignment <= 0)
    return Error("alignment " + std::to_string(plan.alignment) + " is not positive");
  int64_t peak = 0, total = 0;
  for (const BufferPlacement &b : plan.buffers) {
    const std::string what = "buffer '" + b.value + "'";
    if (b.bytes < 0 || b.offset < 0 || b.offset % plan.alignment != 0)
      return Error(what + ": bad size or offset (" + std::to_string(b.bytes) + " bytes at " +
                   std::to_string(b.offset) + ")");
    if (b.first < -1 || b.last > plan.kernels || b.first > b.last)
      return Error(what + ": lifetime [" + std::to_string(b.first) + ", " + std::to_string(b.last) +
                   "] outside [-1, " + std::to_string(plan.kernels) + "]");
    peak = std::max(peak, saturatingAdd(b.offset, b.alignedBytes(plan.alignment)));
    total = saturatingAdd(total, b.alignedBytes(plan.alignment));
  }
  if (peak != plan.peak_bytes || total != plan.total_bytes)
    return Error("peak " + std::to_string(plan.peak_bytes) + " and total " +
                 std::to_string(plan.total_bytes) + " do not match the buffers (" +
                 std::to_string(peak) + ", " + std::to_string(total) + ")");
  // Sweep the buffers by offset: a buffer can only collide with earlier ones
  // whose end lies past its offset.
  std::vector<const BufferPlacement *> by_offset;
  for (const BufferPlacement &b : plan.buffers)
    if (b.bytes > 0)
      by_offset.push_back(&b);
  std::sort(
      by_offset.begin(), by_offset.end(),
      [](const BufferPlacement *a, const BufferPlacement *b) { return a->offset < b->offset; });
  for (size_t i = 0; i < by_offset.size(); ++i) {
    const BufferPlacement &b = *by_offset[i];
    for (size_t j = i + 1; j < by_offset.size() && by_offset[j]->offset < b.offset + b.bytes; ++j)
      if (by_offset[j]->liveWith(b))
        return Error("buffers '" + b.value + "' and '" + by_offset[j]->value +
                     "' are live together and overlap in memory");
  }
  return Status::ok();
}

nlohmann::json memoryPlanToJson(const MemoryPlan &plan) {
  nlohmann::json buffers = nlohmann::json::array();
  for (const BufferPlacement &b : plan.buffers)
    buffers.push_back({{"value", b.value},
                       {"bytes", b.bytes},
                       {"offset", b.offset},
                       {"first", b.first},
                       {"last", b.last}});
  return {{"alignment", plan.alignment},
          {"kernels", plan.kernels},
          {"peak_bytes", plan.peak_bytes},
          {"total_bytes", plan.total_bytes},
          {"buffers", std::move(buffers)}};
}

Expected<MemoryPlan> memoryPlanFromJson(const nlohmann::json &json, std::string_view where) {
  auto bad = [&](const std::string &what) { return Error(std::string(where) + ": " + what); };
  auto integer = [](const nlohmann::json &j, const char *key) {
    return j.is_object() && j.contains(key) && j[key].is_number_integer();
  };
  if (!integer(json, "alignment") || !integer(json, "kernels") || !integer(json, "peak_bytes") ||
      !integer(json, "total_bytes") || !json.contains("buffers") || !json["buffers"].is_array())
    return bad("expected {alignment, kernels, peak_bytes, total_bytes, buffers}");
  MemoryPlan plan;
  plan.alignment = json["alignment"].get<int64_t>();
  plan.kernels = json["kernels"].get<int>();
  plan.peak_bytes = json["peak_bytes"].get<int64_t>();
  plan.total_bytes = json["total_bytes"].get<int64_t>();
  for (const nlohmann::json &b : json["buffers"]) {
    if (!b.is_object() || !b.contains("value") || !b["value"].is_string() || !integer(b, "bytes") ||
        !integer(b, "offset") || !integer(b, "first") || !integer(b, "last"))
      return bad("buffer " + std::to_string(plan.buffers.size()) +
                 ": expected {value, bytes, offset, first, last}");
    plan.buffers.push_back({b["value"].get<std::string>(), b["bytes"].get<int64_t>(),
                            b["offset"].get<int64_t>(), b["first"].get<int>(),
                            b["last"].get<int>()});
  }
  Status ok = verifyMemoryPlan(plan);
  if (!ok)
    return bad(ok.message());
  return plan;
}

} // namespace kiln::executable
