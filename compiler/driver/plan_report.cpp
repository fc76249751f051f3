#include "compiler/driver/plan_report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "compiler/driver/layout_suggestions.h"
#include "compiler/parallel/memory_formula.h"
#include "compiler/parallel/step_time.h"
#include "passes/fusion/flash_attention_fusion.h"
#include "support/byte_size.h"

namespace kiln::driver {

std::string batchSplit(const parallel::TrainingProgram &program) {
  const std::string replica = "(" + std::to_string(program.batch_per_replica) + " per replica";
  if (program.parallel.grad_accum == 1)
    return replica + ")";
  return replica + ": " + std::to_string(program.micro_batch) + " per micro-batch, " +
         std::to_string(program.parallel.grad_accum) + " micro-batches)";
}

namespace {

// "812 (301 unique)"; with pipeline stages, summed over their programs.
std::string stepKernels(const parallel::TrainingProgram &program) {
  int64_t total = 0, unique = 0;
  for (const parallel::CompiledGraph *g : program.stepPrograms()) {
    total += static_cast<int64_t>(g->kernels.kernels.size());
    unique += g->kernels.distinctKernels();
  }
  const int stages = program.parallel.pp, chunks = program.parallel.virtual_stages;
  return std::to_string(total) + " (" + std::to_string(unique) + " unique" +
         (stages > 1 ? ", in " + std::to_string(stages) + " pipeline stages" : "") +
         (chunks > 1 ? " of " + std::to_string(chunks) + " interleaved model stages each" : "") +
         ")";
}

// The cost model's step time, with the kernel kinds that take the most.
std::string predictedTime(const target::Target &target, const parallel::TrainingProgram &program) {
  const int nodes = parallel::nodesFor(target, program.parallel.devices);
  auto time = parallel::predictStepTime(program, target, nodes);
  if (!time)
    return "no predicted step time: " + time.message();
  std::vector<std::pair<double, std::string>> kinds;
  for (const auto &[kind, s] : time->kernel_kinds)
    kinds.emplace_back(s, kind);
  std::sort(kinds.rbegin(), kinds.rend());
  std::string text = "predicted on " + target.name + " (" + std::to_string(nodes) + " node" +
                     (nodes == 1 ? "" : "s") + ", the target's roofline): " + time->toText();
  for (size_t i = 0; i < kinds.size() && i < 3; ++i) {
    text += (i == 0 ? "; kernels by kind: " : ", ") + kinds[i].second + " " +
            parallel::formatSeconds(kinds[i].first);
  }
  return text;
}

} // namespace

std::string planReport(const ModelRequest &model, const ResolvedJob &job,
                       const KernelSettings &settings, const parallel::ParallelConfig &layout,
                       const frontend::DecoderConfig &config,
                       const parallel::TrainingProgram &program, int64_t capacity) {
  const parallel::DeviceMemoryEstimate &m = program.memory;
  const passes::RecomputeMode recompute = passes::recomputeSettings(*job.context).mode;
  std::ostringstream out;
  out << "kiln: compiled the training step for " << layout.toString() << ", global batch "
      << model.batch << " " << batchSplit(program) << ", seq " << program.seq << "; "
      << job.target.name << ", " << numericsSummary(job) << "\n"
      << "  step kernels: " << stepKernels(program)
      << "; update buckets: " << program.optimizers.size() << "\n"
      << "  " << m.toText() << "\n  at the peak ("
      << (m.breakdown.update ? "the update" : "the step") << "): " << m.breakdown.toText()
      << (m.breakdown.update ? "\n  the step at its peak: " + m.step_breakdown.toText() : "")
      << "\n  the formula for this layout (ZeRO's model states, Korthikanti et al.'s "
         "activations for kiln's layer, recompute "
      << passes::recomputeModeName(recompute) << "; logits not counted): "
      << parallel::memoryFormula(config, model.lora, layout, program.micro_batch, program.seq,
                                 job.dtype, recompute, passes::fusesAttention(*job.context))
             .toText()
      << "\n  device " << formatBytes(capacity) << ": "
      << (m.peak <= capacity ? "fits" : "does NOT fit") << " (npu:" << m.rank
      << " has the highest peak)\n  " << predictedTime(job.target, program)
      << "\n  the step's largest buffers:\n";
  for (const auto &[name, bytes] : m.largest)
    out << "    " << name << ": " << formatBytes(bytes) << "\n";
  if (m.peak <= capacity)
    return out.str();
  const std::vector<LayoutSuggestion> suggestions =
      suggestLayouts(model, job, settings, layout, m.peak, capacity);
  if (!suggestions.empty())
    out << "  switches that lower the peak (each planned as --compile-only plans it):\n";
  for (const LayoutSuggestion &s : suggestions)
    out << "    " << s.flags << ": " << formatBytes(s.peak) << ", "
        << (s.fits ? "fits" : "does not fit") << "\n";
  return out.str();
}

} // namespace kiln::driver
