#include "compiler/parallel/training_program.h"

#include <algorithm>

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

  DeviceMemoryEstimate best;
  for (int r = 0; r < program.parallel.dp; ++r) {
    DeviceMemoryEstimate e;
    e.rank = r * program.parallel.tp; // the replica's first device
    e.step_peak = step.peak_bytes;
    for (const auto &[name, type] : program.frozen)
      e.frozen_weights = saturatingAdd(e.frozen_weights, bytesOf(type));
    for (const auto &[name, type] : program.params)
      e.trainable_weights = saturatingAdd(e.trainable_weights, bytesOf(type));
    // During the update the device holds every weight (frozen ones too),
    // every f32 gradient and the moments it owns; one bucket at a time adds
    // its new weights and moments.
    int64_t held = e.frozen_weights;
    for (size_t i = 0; i < program.params.size(); ++i) {
      const TensorType &t = program.params[i].second;
      const int64_t f32_bytes = saturatingMul(4, numElements(t.shape));
      if (program.owner[i] == -1 || program.owner[i] == r)
        e.optimizer_state = saturatingAdd(e.optimizer_state, saturatingMul(2, f32_bytes));
      held = saturatingAdd(held, saturatingAdd(bytesOf(t), f32_bytes));
    }
    int64_t largest_bucket = 0;
    for (size_t b : program.updatesOf(r))
      largest_bucket = std::max(largest_bucket, bucket_extra[b]);
    e.update_peak = saturatingAdd(saturatingAdd(held, e.optimizer_state), largest_bucket);
    // With micro-batches, each parameter's f32 gradient sum stays on the
    // device while the next micro-batch runs.
    if (program.parallel.grad_accum > 1)
      for (const auto &[name, type] : program.params)
        e.accumulated_gradients =
            saturatingAdd(e.accumulated_gradients, saturatingMul(4, numElements(type.shape)));
    e.peak = std::max(
        saturatingAdd(saturatingAdd(e.step_peak, e.accumulated_gradients), e.optimizer_state),
        e.update_peak);
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
