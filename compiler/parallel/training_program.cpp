#include "compiler/parallel/training_program.h"

#include <algorithm>
#include <map>
#include <set>

#include "compiler/artifact/memory_plan.h"
#include "ir/byte_size.h"

namespace kiln::parallel {
namespace {

// Sizes saturate at INT64_MAX: a plan past it reads "does not fit", never a
// wrapped small number (each value's own size is checked where it is built).
int64_t bytesOf(const TensorType &t) {
  return saturatingMul(numElements(t.shape), static_cast<int64_t>(dtypeSize(t.dtype)));
}

artifact::MemoryPlan planOf(const CompiledGraph &g) {
  std::vector<codegen::KernelSpec> specs;
  for (const codegen::CompiledKernel &k : g.kernels.kernels)
    specs.push_back(k.spec);
  // The trainer keeps weights, moments and gradients on the device throughout.
  return artifact::planMemory(g.graph, specs, artifact::kDefaultBufferAlignment,
                              /*inputs_stay=*/true);
}

} // namespace

std::string DeviceMemoryEstimate::toText() const {
  const std::string frozen = frozen_weights == 0
                                 ? ""
                                 : ", of which frozen base weights " + formatBytes(frozen_weights) +
                                       " and trainable weights " + formatBytes(trainable_weights);
  const std::string accumulated =
      accumulated_gradients == 0 ? ""
                                 : " + accumulated gradients " + formatBytes(accumulated_gradients);
  return "per device: peak " + formatBytes(peak) + " (step " + formatBytes(step_peak) + frozen +
         accumulated + " + optimizer state " + formatBytes(optimizer_state) + "; update " +
         formatBytes(update_peak) + ")";
}

namespace {

// The step's bytes at its busiest kernel, by kind (the rest of `breakdown`
// is filled by the caller).
MemoryBreakdown stepBreakdown(const CompiledGraph &step, const artifact::MemoryPlan &plan) {
  const Graph &g = step.graph;
  std::map<std::string, InputRole> inputs;
  for (const GraphInput &in : g.inputs())
    inputs[in.name] = in.role;
  std::set<std::string> gradients;
  for (const GraphOutput &out : g.outputs())
    if (out.name.starts_with("grad."))
      gradients.insert(g.valueName(out.value));
  // The kernel with the most bytes live.
  int busiest = -1;
  int64_t most = -1;
  for (int t = -1; t <= plan.kernels; ++t) {
    int64_t live = 0;
    for (const artifact::BufferPlacement &b : plan.buffers)
      if (b.first <= t && t <= b.last)
        live += b.alignedBytes(plan.alignment);
    if (live > most) {
      most = live;
      busiest = t;
    }
  }
  MemoryBreakdown m;
  for (const artifact::BufferPlacement &b : plan.buffers) {
    if (b.first > busiest || busiest > b.last)
      continue;
    const int64_t bytes = b.alignedBytes(plan.alignment);
    auto in = inputs.find(b.value);
    if (in != inputs.end() && in->second == InputRole::Parameter)
      m.weights += bytes;
    else if (in != inputs.end() && in->second == InputRole::Frozen)
      m.frozen_weights += bytes;
    else if (gradients.count(b.value))
      m.gradients += bytes;
    else
      m.activations += bytes;
  }
  m.workspace = std::max<int64_t>(0, plan.peak_bytes - std::max<int64_t>(0, most));
  return m;
}

} // namespace

int64_t MemoryBreakdown::total() const {
  int64_t sum = 0;
  for (int64_t part : {weights, frozen_weights, gradients, optimizer_state, accumulated_gradients,
                       activations, workspace})
    sum = saturatingAdd(sum, part);
  return sum;
}

std::vector<std::pair<std::string, int64_t>> MemoryBreakdown::parts() const {
  const std::pair<const char *, int64_t> all[] = {
      {"weights", weights},
      {"frozen weights", frozen_weights},
      {update ? "gradients (f32)" : "gradients", gradients},
      {"optimizer state", optimizer_state},
      {"accumulated gradients", accumulated_gradients},
      {"activations", activations},
      {update ? "the largest bucket's new weights and moments" : "workspace (packing)", workspace}};
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto &[name, bytes] : all)
    if (bytes > 0)
      out.emplace_back(name, bytes);
  return out;
}

std::string MemoryBreakdown::toText() const {
  std::string out;
  for (const auto &[name, bytes] : parts())
    out += (out.empty() ? "" : ", ") + name + " " + formatBytes(bytes);
  return out;
}

DeviceMemoryEstimate estimateDeviceMemory(const TrainingProgram &program) {
  const artifact::MemoryPlan step = planOf(program.step);
  // What each bucket's update adds to the inputs it reads, which the
  // device holds throughout.
  std::vector<int64_t> bucket_extra;
  for (const CompiledGraph &g : program.optimizers) {
    int64_t inputs = 0;
    for (const GraphInput &in : g.graph.inputs())
      inputs = saturatingAdd(inputs, bytesOf(g.graph.type(in.value)));
    bucket_extra.push_back(std::max<int64_t>(0, planOf(g).peak_bytes - inputs));
  }

  const MemoryBreakdown in_step = stepBreakdown(program.step, step);
  DeviceMemoryEstimate best;
  for (int r = 0; r < program.parallel.dp; ++r) {
    DeviceMemoryEstimate e;
    e.rank = r * program.parallel.tp; // the replica's first device
    e.step_peak = step.peak_bytes;
    for (const Parameter &p : program.frozen)
      e.frozen_weights = saturatingAdd(e.frozen_weights, bytesOf(p.type));
    for (const Parameter &p : program.params)
      e.trainable_weights = saturatingAdd(e.trainable_weights, bytesOf(p.type));
    // During the update the device holds every weight (frozen ones too),
    // every f32 gradient (with ZeRO-2 those it owns) and the moments it
    // owns; one bucket at a time adds its new weights and moments.
    MemoryBreakdown in_update;
    in_update.update = true;
    in_update.frozen_weights = e.frozen_weights;
    for (const Parameter &p : program.params) {
      const TensorType &t = p.type;
      const int64_t f32_bytes = saturatingMul(4, numElements(t.shape));
      const bool owns = p.owner == -1 || p.owner == r;
      if (owns)
        e.optimizer_state = saturatingAdd(e.optimizer_state, saturatingMul(2, f32_bytes));
      in_update.weights = saturatingAdd(in_update.weights, bytesOf(t));
      if (owns || program.parallel.zero < 2)
        in_update.gradients = saturatingAdd(in_update.gradients, f32_bytes);
    }
    const int64_t held =
        saturatingAdd(saturatingAdd(e.frozen_weights, in_update.weights), in_update.gradients);
    int64_t largest_bucket = 0;
    for (size_t b : program.updatesOf(r))
      largest_bucket = std::max(largest_bucket, bucket_extra[b]);
    e.update_peak = saturatingAdd(saturatingAdd(held, e.optimizer_state), largest_bucket);
    in_update.optimizer_state = e.optimizer_state;
    in_update.workspace = largest_bucket;
    // With micro-batches, each parameter's f32 gradient sum stays on the
    // device while the next micro-batch runs.
    if (program.parallel.grad_accum > 1)
      for (const Parameter &p : program.params)
        e.accumulated_gradients =
            saturatingAdd(e.accumulated_gradients, saturatingMul(4, numElements(p.type.shape)));
    e.peak = std::max(
        saturatingAdd(saturatingAdd(e.step_peak, e.accumulated_gradients), e.optimizer_state),
        e.update_peak);
    if (e.update_peak >= e.peak) {
      e.breakdown = in_update;
    } else {
      e.breakdown = in_step;
      e.breakdown.optimizer_state = e.optimizer_state;
      e.breakdown.accumulated_gradients = e.accumulated_gradients;
    }
    if (r == 0 || e.peak > best.peak)
      best = e;
  }
  std::vector<artifact::BufferPlacement> buffers = step.buffers;
  std::sort(buffers.begin(), buffers.end(),
            [](const auto &a, const auto &b) { return a.bytes > b.bytes; });
  for (size_t i = 0; i < std::min<size_t>(5, buffers.size()); ++i)
    best.largest.emplace_back(buffers[i].value, buffers[i].bytes);
  return best;
}

} // namespace kiln::parallel
