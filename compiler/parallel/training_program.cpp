#include "compiler/parallel/training_program.h"

#include <algorithm>
#include <map>
#include <set>

#include "compiler/parallel/pipeline_schedule.h"
#include "executable/memory_plan.h"
#include "support/byte_size.h"

namespace kiln::parallel {
namespace {

// Sizes saturate at INT64_MAX: a plan past it reads "does not fit", never a
// wrapped small number (each value's own size is checked where it is built).
int64_t bytesOf(const TensorType &t) {
  return saturatingMul(numElements(t.shape), static_cast<int64_t>(dtypeSize(t.dtype)));
}

// What one run of a program adds to what its device holds, as the executor
// counts it (runtime/executor.h): the arena of the values its kernels write
// and the inputs it receives (tokens, scalars, what a pipeline stage is
// sent). `held`: what the trainer keeps on the device, read where it is;
// `leaving`: outputs that leave the device as they are made (the
// gradients, ParallelConfig::gradientsLeaveWhenMade).
executable::MemoryPlan runPlan(const CompiledGraph &g, const std::set<std::string> &held,
                               const std::set<std::string> *leaving = nullptr) {
  std::vector<executable::KernelSpec> specs;
  for (const executable::CompiledKernel &k : g.kernels.kernels)
    specs.push_back(k.spec);
  executable::Lifetimes lifetimes;
  lifetimes.input_outside = [&held](const GraphInput &in) { return held.count(in.name) > 0; };
  if (leaving)
    lifetimes.output_leaves = [leaving](const GraphOutput &out) {
      return leaving->count(out.name) > 0;
    };
  return executable::planMemory(g.graph, specs, executable::kDefaultBufferAlignment, lifetimes);
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
  const std::string pipeline = in_flight == 0 ? ""
                                              : ", " + std::to_string(in_flight) + " micro-batch" +
                                                    (in_flight == 1 ? "" : "es") + " in flight";
  return "per device: peak " + formatBytes(peak) + " (step " + formatBytes(step_peak) + frozen +
         pipeline + accumulated + " + optimizer state " + formatBytes(optimizer_state) +
         "; update " + formatBytes(update_peak) + ")";
}

namespace {

// A run's bytes at its busiest kernel, by kind: gradients, activations
// (what it receives among them) and the arena's packing. The weights the
// device holds are the caller's to add.
MemoryBreakdown runBreakdown(const CompiledGraph &program, const executable::MemoryPlan &plan) {
  const Graph &g = program.graph;
  std::set<std::string> gradients;
  for (const GraphOutput &out : g.outputs())
    if (out.name.starts_with("grad."))
      gradients.insert(g.valueName(out.value));
  // The kernel with the most bytes live.
  int busiest = -1;
  int64_t most = -1;
  for (int t = -1; t <= plan.kernels; ++t) {
    int64_t live = 0;
    for (const executable::BufferPlacement &b : plan.buffers)
      if (b.first <= t && t <= b.last)
        live += b.alignedBytes(plan.alignment);
    if (live > most) {
      most = live;
      busiest = t;
    }
  }
  MemoryBreakdown m;
  for (const executable::BufferPlacement &b : plan.buffers) {
    if (b.first > busiest || busiest > b.last)
      continue;
    int64_t &kind = gradients.count(b.value) ? m.gradients : m.activations;
    kind = saturatingAdd(kind, b.alignedBytes(plan.alignment));
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

int64_t Parameter::copyBytes() const {
  return copy_dtype ? bytesOf(TensorType{*copy_dtype, type.shape}) : 0;
}

int64_t Parameter::keptBytes() const { return saturatingAdd(bytesOf(heldType()), copyBytes()); }

std::set<std::string> TrainingProgram::heldBuffers() const {
  std::set<std::string> held;
  for (const std::vector<Parameter> *table : {&params, &frozen})
    for (const Parameter &p : *table)
      held.insert(p.name);
  for (const std::vector<std::string> *names :
       {&signature.gradient, &signature.moment, &signature.velocity, &signature.weight_copy})
    for (const std::string &name : *names)
      if (!name.empty())
        held.insert(name);
  return held;
}

std::vector<const CompiledGraph *> TrainingProgram::stepPrograms() const {
  if (stages.empty())
    return {&step};
  std::vector<const CompiledGraph *> programs;
  for (const PipelineStage &s : stages) {
    programs.push_back(&s.forward);
    programs.push_back(&s.backward);
  }
  return programs;
}

namespace {

// The step's side of one device's peak: the bytes at its busiest moment
// besides the weights and optimizer state it keeps (the estimate adds
// those).
struct StepPeak {
  int64_t bytes = 0;       // the run's arena, and what the stage holds besides
  int64_t accumulated = 0; // the gradients' f32 sums beside it then
  MemoryBreakdown breakdown;
  const executable::MemoryPlan *plan = nullptr; // of the program running then
  int in_flight = 0;                            // micro-batches the stage holds then (pipeline)
};

// Without pipeline stages: the step's run, with every gradient's f32 sum
// beside it when micro-batches accumulate.
StepPeak wholeStepPeak(const TrainingProgram &program, const executable::MemoryPlan &plan,
                       int64_t accumulated) {
  StepPeak p{plan.peak_bytes, accumulated, runBreakdown(program.step, plan), &plan, 0};
  p.breakdown.accumulated_gradients = accumulated;
  return p;
}

// With pipeline stages: each device (pipeline rank) walks the schedule as
// the trainer runs it. During an action the device holds its program's run,
// what it keeps for other micro-batches and model stages (their stashes and
// received activations and gradients) and, of each of its model stages
// whose first backward has run, the gradients' f32 sums. `sums`: per model
// stage, the bytes of the f32 sums its device keeps.
std::vector<StepPeak> pipelineStepPeaks(const TrainingProgram &program,
                                        const std::vector<executable::MemoryPlan> &runs,
                                        const std::vector<int64_t> &sums) {
  const ParallelConfig &layout = program.parallel;
  const int P = layout.pp;
  std::map<std::string, int64_t> transfer_bytes;
  for (const StageTransfer &t : program.transfers) {
    const Graph &g = program.stages[t.from.stage].program(t.from.forward).graph;
    transfer_bytes[t.name] = bytesOf(g.type(g.findOutput(t.name)->value));
  }
  // What a device holds for micro-batch m: transfer name -> consumer programs to come.
  std::vector<std::map<std::pair<int, std::string>, int>> held(P);
  std::vector<bool> summing(program.stages.size(), false);
  std::vector<int64_t> accumulated_on(P, 0); // the sums each device holds so far
  std::vector<StepPeak> peaks(P);
  for (const PipelineAction &a : pipelineSchedule(P, layout.grad_accum, layout.virtual_stages)) {
    const int rank = layout.pipelineRank(a.stage);
    const CompiledGraph &g = program.stages[a.stage].program(a.forward);
    const executable::MemoryPlan &run = runs[2 * a.stage + (a.forward ? 0 : 1)];
    int64_t kept = 0;
    std::set<int> in_flight; // the micro-batches it keeps something of
    for (const auto &[key, uses] : held[rank])
      if (!(key.first == a.micro && g.graph.findInput(key.second))) {
        kept = saturatingAdd(kept, transfer_bytes[key.second]);
        in_flight.insert(key.first);
      }
    const int64_t accumulated = accumulated_on[rank];
    const int64_t bytes = saturatingAdd(run.peak_bytes, kept);
    StepPeak &peak = peaks[rank];
    if (saturatingAdd(bytes, accumulated) > saturatingAdd(peak.bytes, peak.accumulated)) {
      peak = {bytes, accumulated, runBreakdown(g, run), &run,
              static_cast<int>(in_flight.size()) + 1};
      peak.breakdown.activations = saturatingAdd(peak.breakdown.activations, kept);
      peak.breakdown.accumulated_gradients = accumulated;
    }
    // What the program read, it no longer holds unless a later program of
    // the device reads it too; what it sends, the receiving devices hold.
    for (auto it = held[rank].begin(); it != held[rank].end();)
      if (it->first.first == a.micro && g.graph.findInput(it->first.second) && --it->second == 0)
        it = held[rank].erase(it);
      else
        ++it;
    for (const StageTransfer &t : program.transfers) {
      if (!(t.from == StageProgram{a.stage, a.forward}))
        continue;
      for (const StageProgram &to : t.to)
        ++held[layout.pipelineRank(to.stage)][{a.micro, t.name}];
    }
    if (!a.forward && !summing[a.stage]) {
      summing[a.stage] = true;
      accumulated_on[rank] = saturatingAdd(accumulated_on[rank], sums[a.stage]);
    }
  }
  return peaks;
}

// Stage s's devices (of any replica): their step side `step`, what it keeps
// between steps, and its update (what it holds plus its largest bucket's
// new weights and moments, `bucket_extra`).
DeviceMemoryEstimate deviceEstimate(const TrainingProgram &program, int s, const StepPeak &step,
                                    const std::vector<int64_t> &bucket_extra) {
  DeviceMemoryEstimate e;
  e.rank = s * program.parallel.tp; // replica 0's stage's first device
  e.accumulated_gradients = step.accumulated;
  e.in_flight = step.in_flight;
  for (const Parameter &p : program.frozen)
    if (p.stage == s)
      e.frozen_weights = saturatingAdd(e.frozen_weights, bytesOf(p.type));
  for (const Parameter &p : program.params)
    if (p.stage == s)
      e.trainable_weights = saturatingAdd(e.trainable_weights, p.keptBytes());
  e.step_peak = saturatingAdd(step.bytes, saturatingAdd(e.frozen_weights, e.trainable_weights));
  // During the update the device holds its weights (frozen ones too), the
  // f32 gradient sums (with ZeRO-2 and -3 its slices of them) and the
  // moments of its slices; one bucket at a time adds its new weights and
  // moments.
  MemoryBreakdown in_update;
  in_update.update = true;
  in_update.frozen_weights = e.frozen_weights;
  for (const Parameter &p : program.params) {
    if (p.stage != s)
      continue;
    const int64_t slice_f32 = saturatingMul(4, numElements(p.sliceType().shape));
    e.optimizer_state = saturatingAdd(e.optimizer_state, saturatingMul(2, slice_f32));
    in_update.weights = saturatingAdd(in_update.weights, p.keptBytes());
    in_update.gradients =
        saturatingAdd(in_update.gradients, program.parallel.gradientsLeaveWhenMade()
                                               ? slice_f32
                                               : saturatingMul(4, numElements(p.type.shape)));
  }
  const int64_t held =
      saturatingAdd(saturatingAdd(e.frozen_weights, in_update.weights), in_update.gradients);
  int64_t largest_bucket = 0;
  for (size_t b = 0; b < program.optimizers.size(); ++b)
    if (program.bucket_stage[b] == s)
      largest_bucket = std::max(largest_bucket, bucket_extra[b]);
  e.update_peak = saturatingAdd(saturatingAdd(held, e.optimizer_state), largest_bucket);
  in_update.optimizer_state = e.optimizer_state;
  in_update.workspace = largest_bucket;
  e.peak = std::max(
      saturatingAdd(saturatingAdd(e.step_peak, e.accumulated_gradients), e.optimizer_state),
      e.update_peak);
  e.step_breakdown = step.breakdown;
  e.step_breakdown.weights = e.trainable_weights;
  e.step_breakdown.frozen_weights = e.frozen_weights;
  e.step_breakdown.optimizer_state = e.optimizer_state;
  e.breakdown = e.update_peak >= e.peak ? in_update : e.step_breakdown;
  return e;
}

} // namespace

DeviceMemoryEstimate estimateDeviceMemory(const TrainingProgram &program) {
  const int P = program.parallel.pp;
  // What each bucket's update adds to the weights, moments and gradients
  // the device holds throughout.
  const std::set<std::string> held = program.heldBuffers();
  std::vector<int64_t> bucket_extra;
  for (const CompiledGraph &g : program.optimizers)
    bucket_extra.push_back(runPlan(g, held).peak_bytes);
  // Per model stage (one without stages), the f32 gradient sums its device
  // keeps: every parameter's, or with ZeRO-2 and -3 (the gradients leave as
  // they are made) its slices. Every replica holds the same bytes (ZeRO's
  // slices are equal), so replica 0's devices stand for all.
  const bool leave = program.parallel.gradientsLeaveWhenMade();
  std::vector<int64_t> sums(std::max<size_t>(1, program.stages.size()), 0);
  for (const Parameter &p : program.params)
    sums[p.model_stage] = saturatingAdd(
        sums[p.model_stage], saturatingMul(4, numElements((leave ? p.sliceType() : p.type).shape)));
  const std::set<std::string> gradients(program.signature.gradient.begin(),
                                        program.signature.gradient.end());
  std::vector<executable::MemoryPlan> runs;
  for (const CompiledGraph *g : program.stepPrograms())
    runs.push_back(runPlan(*g, held, leave ? &gradients : nullptr));
  std::vector<StepPeak> step_peaks;
  if (!program.stages.empty()) {
    step_peaks = pipelineStepPeaks(program, runs, sums);
  } else {
    // With micro-batches, the f32 sums stay while the next micro-batch runs.
    step_peaks.push_back(
        wholeStepPeak(program, runs.front(), program.parallel.grad_accum > 1 ? sums[0] : 0));
  }

  DeviceMemoryEstimate best;
  for (int s = 0; s < P; ++s) {
    const DeviceMemoryEstimate e = deviceEstimate(program, s, step_peaks[s], bucket_extra);
    if (s == 0 || e.peak > best.peak) {
      best = e;
      // The stage's weights and the step's buffers, largest first.
      std::vector<std::pair<std::string, int64_t>> buffers;
      for (const std::vector<Parameter> *table : {&program.params, &program.frozen})
        for (const Parameter &p : *table)
          if (p.stage == s)
            buffers.emplace_back(p.name, bytesOf(p.heldType()));
      for (size_t i = 0; i < program.params.size(); ++i)
        if (program.params[i].stage == s && program.params[i].copy_dtype)
          buffers.emplace_back(program.signature.weight_copy[i], program.params[i].copyBytes());
      for (const executable::BufferPlacement &b : step_peaks[s].plan->buffers)
        buffers.emplace_back(b.value, b.bytes);
      std::stable_sort(buffers.begin(), buffers.end(),
                       [](const auto &a, const auto &b) { return a.second > b.second; });
      buffers.resize(std::min<size_t>(5, buffers.size()));
      best.largest = std::move(buffers);
    }
  }
  return best;
}

} // namespace kiln::parallel
