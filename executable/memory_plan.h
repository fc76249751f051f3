// The memory plan of a compiled graph: every value a kernel stores (and every
// graph input) gets an offset in one arena, so that values whose lifetimes
// overlap never share bytes and values that are dead reuse them.
//
// Lifetimes count in kernels, in execution order: a value lives from the
// kernel that writes it to the last kernel that reads it, both included
// (a kernel's inputs and outputs are live together). Graph inputs live from
// the start (first = -1), graph outputs to the end (last = kernel count).
// Values inside a fused kernel never reach memory and are not planned. The
// output of a kernel that aliases its input (aliasesItsInput) has
// no buffer of its own: the input's lives until the alias's last reader.
//
// Placement is greedy by size (TFLite's "greedy by size", best fit): largest
// first, each into the smallest gap between the already placed buffers it is
// live with that holds it (the lowest such gap on a tie), or above all of
// them when none does. Sizes are rounded up to `alignment` before placing.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "executable/kernel_spec.h"
#include "ir/graph.h"
#include "support/error.h"

namespace kiln::executable {

inline constexpr int64_t kDefaultBufferAlignment = 64; // a cache line

struct BufferPlacement {
  std::string value; // the value's name (Graph::valueName)
  int64_t bytes = 0; // as stored, before alignment
  int64_t offset = 0;
  int first = 0; // the kernel that writes it; -1: a graph input
  int last = 0;  // the last kernel that reads it; the kernel count: a graph output

  int64_t alignedBytes(int64_t alignment) const;
  bool liveWith(const BufferPlacement &other) const {
    return first <= other.last && other.first <= last;
  }
};

struct MemoryPlan {
  int64_t alignment = kDefaultBufferAlignment;
  int kernels = 0;                      // the plan's time axis: [-1, kernels]
  int64_t peak_bytes = 0;               // the arena: the end of the highest buffer
  int64_t total_bytes = 0;              // every buffer on its own (aligned): the naive plan
  std::vector<BufferPlacement> buffers; // in value order
};

// Where the run's own lifetimes differ from "inputs until their last
// reader, outputs until the end".
struct Lifetimes {
  // Inputs in the arena that live to the end (a weight a device keeps
  // there for the whole run). Empty: none. The trainer keeps its weights
  // outside the arena instead (input_outside).
  std::function<bool(const GraphInput &)> input_stays;
  // Outputs that leave the device as they are made (a gradient
  // reduce-scattered during the backward): they live to their last reader
  // only. Empty: none.
  std::function<bool(const GraphOutput &)> output_leaves;
  // Inputs read where the caller keeps them (a trainer's weights, moments
  // and gradient sums, bound without a copy), outside the arena: not
  // planned. Empty: none; the arena holds every input, as a device that is
  // handed its inputs does.
  std::function<bool(const GraphInput &)> input_outside;
};

// Plans the values of `graph` that `kernels` (the execution order) store.
MemoryPlan planMemory(const Graph &graph, const std::vector<KernelSpec> &kernels,
                      int64_t alignment = kDefaultBufferAlignment, const Lifetimes &lifetimes = {});

// Checks the plan's invariants: aligned offsets, lifetimes inside the time
// axis, no two live-together buffers sharing a byte, the peak and the total
// matching the buffers. Names the first pair that breaks one.
Status verifyMemoryPlan(const MemoryPlan &plan);

nlohmann::json memoryPlanToJson(const MemoryPlan &plan);
// `where` names the plan in errors ("bucket seq 8: memory plan").
Expected<MemoryPlan> memoryPlanFromJson(const nlohmann::json &json, std::string_view where);

} // namespace kiln::executable
