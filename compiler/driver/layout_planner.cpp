#include "compiler/driver/layout_planner.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <tuple>

#include "compiler/parallel/stage_split.h"
#include "ir/layer_scope.h"
#include "support/byte_size.h"
#include "support/progress.h"

namespace kiln::driver {

using passes::RecomputeMode;

std::string LayoutCandidate::trainFlags() const {
  std::string flags = "--tp " + std::to_string(layout.tp);
  if (layout.sequenceParallel())
    flags += " --sequence-parallel";
  if (layout.pp > 1)
    flags += " --pp " + std::to_string(layout.pp);
  if (layout.virtual_stages > 1)
    flags += " --virtual-stages " + std::to_string(layout.virtual_stages);
  if (!layout.stage_layers.empty()) {
    flags += " --pp-layers ";
    for (size_t i = 0; i < layout.stage_layers.size(); ++i)
      flags += (i ? "," : "") + std::to_string(layout.stage_layers[i]);
  }
  if (layout.dp > 1)
    flags += " --zero " + std::to_string(layout.zero);
  flags += " --recompute " + std::string(passes::recomputeModeName(recompute));
  if (layout.grad_accum > 1)
    flags += (layout.pp > 1 ? " --micro-batches " : " --grad-accum ") +
             std::to_string(layout.grad_accum);
  return flags;
}

const LayoutCandidate *LayoutPlan::recommended() const {
  return !candidates.empty() && candidates.front().fits ? &candidates.front() : nullptr;
}

namespace {

constexpr RecomputeMode kRecomputeModes[] = {RecomputeMode::None, RecomputeMode::Selective,
                                             RecomputeMode::Full};

// Plans layouts of one model, reusing each compiled step for every layout
// that shares its tensor-parallel size, pipeline stages, recomputation and
// micro-batch.
class Planner {
public:
  Planner(const PlanRequest &request, const ResolvedJob &job, const KernelSettings &settings)
      : request_(request), job_(job), settings_(settings) {
    settings_.compile_objects = false; // a plan: partitioned and checked, nothing compiled
    settings_.dump_dir.clear();
  }

  // The candidate; nothing when the model cannot take the layout (the heads
  // do not split `tp` ways, the batch does not split over the replicas).
  Expected<std::optional<LayoutCandidate>> plan(int tp, int pp, int zero, RecomputeMode recompute,
                                                int64_t micro_batch, bool sequence_parallel = false,
                                                int virtual_stages = 1,
                                                const std::vector<int> &stage_layers = {}) {
    const int dp = request_.devices / (tp * pp);
    const int64_t batch = request_.model.batch;
    if (request_.devices % (tp * pp) != 0 || batch % dp != 0 || (batch / dp) % micro_batch != 0)
      return std::optional<LayoutCandidate>();
    auto layout = parallel::resolveParallelConfig(request_.devices, dp, tp, zero, batch,
                                                  static_cast<int>(batch / dp / micro_batch), pp);
    if (!layout || !parallel::setPipelineShape(*layout, virtual_stages, stage_layers))
      return std::optional<LayoutCandidate>();
    layout->sequence_parallel = sequence_parallel;
    const parallel::TrainingProgram *step = stepFor(*layout, recompute);
    if (!step)
      return std::optional<LayoutCandidate>();
    parallel::TrainingProgram program = *step;
    program.parallel = *layout;
    program.batch_per_replica = batch / dp;
    KILN_RETURN_IF_ERROR(addTrainingUpdates(program, job_, settings_, nullptr));
    return std::optional(candidate(program, recompute));
  }

  // The compiled step of a plain pipeline of `pp` stages at `tp` (planned
  // before), or null.
  const parallel::TrainingProgram *plainStep(int tp, int pp, RecomputeMode recompute,
                                             bool sequence_parallel) {
    for (const auto &[key, step] : steps_)
      if (std::get<0>(key) == tp && std::get<1>(key) == pp && std::get<3>(key) == recompute &&
          std::get<5>(key) == sequence_parallel && std::get<6>(key) == 1 &&
          std::get<7>(key).empty() && step)
        return &*step;
    return nullptr;
  }

  // Why the model could take no layout at all: the first step that failed.
  const std::string &firstFailure() const { return first_failure_; }
  const std::string &noTime() const { return no_time_; }

private:
  const parallel::TrainingProgram *stepFor(const parallel::ParallelConfig &layout,
                                           RecomputeMode recompute) {
    const int64_t micro = request_.model.batch / layout.dp / layout.grad_accum;
    // ZeRO-3's step holds slices over the replicas: its own per replica count.
    const int sliced_over = layout.zero == 3 ? layout.dp : 0;
    const auto key =
        std::make_tuple(layout.tp, layout.pp, sliced_over, recompute, micro,
                        layout.sequenceParallel(), layout.virtual_stages, layout.stage_layers);
    auto found = steps_.find(key);
    if (found == steps_.end()) {
      auto step = compileTrainingStep(request_.model, withRecompute(job_, recompute), settings_,
                                      layout, nullptr);
      if (!step && first_failure_.empty())
        first_failure_ = step.message();
      found = steps_.emplace(key, step ? std::optional(std::move(*step)) : std::nullopt).first;
    }
    return found->second ? &*found->second : nullptr;
  }

  LayoutCandidate candidate(const parallel::TrainingProgram &program, RecomputeMode recompute) {
    const int64_t capacity = request_.device_memory;
    LayoutCandidate c;
    c.layout = program.parallel;
    c.recompute = recompute;
    c.micro_batch = program.micro_batch;
    c.peak = program.memory.peak;
    c.fits = c.peak <= capacity;
    c.breakdown = program.memory.breakdown;
    if (!c.fits) {
      c.reason = "needs " + formatBytes(c.peak) + " of " + formatBytes(capacity);
      if (formatBytes(c.peak) == formatBytes(capacity)) // rounded alike: say by how much
        c.reason += " (" + std::to_string(c.peak - capacity) + " bytes over)";
      std::vector<std::pair<std::string, int64_t>> parts = c.breakdown.parts();
      auto largest = std::max_element(parts.begin(), parts.end(),
                                      [](auto &a, auto &b) { return a.second < b.second; });
      if (largest != parts.end())
        c.reason += "; the largest part: " + largest->first + " " + formatBytes(largest->second);
      if (!program.memory.largest.empty())
        c.reason += "; the largest buffer: " + program.memory.largest.front().first + " " +
                    formatBytes(program.memory.largest.front().second);
    }
    auto time = parallel::predictStepTime(program, job_.target, request_.nodes);
    if (time)
      c.time = *time;
    else if (no_time_.empty())
      no_time_ = time.message();
    return c;
  }

  const PlanRequest &request_;
  const ResolvedJob &job_;
  KernelSettings settings_;
  std::map<std::tuple<int, int, int, RecomputeMode, int64_t, bool, int, std::vector<int>>,
           std::optional<parallel::TrainingProgram>>
      steps_;
  std::string first_failure_, no_time_;
};

// The transformer layers of `program`'s model: one past the highest any
// weight's name holds.
int64_t transformerLayersOf(const parallel::TrainingProgram &program) {
  int64_t layers = 0;
  for (const std::vector<parallel::Parameter> *table : {&program.params, &program.frozen})
    for (const parallel::Parameter &p : *table)
      layers = std::max(layers, layerWithin(p.name) + 1);
  return layers;
}

std::vector<int> divisorsOf(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0)
      out.push_back(d);
  return out;
}

// The (tensor-parallel, pipeline) sizes worth planning on `devices`: every
// tensor-parallel divisor with 1, 2 or 4 stages (Megatron's and
// MindFormers' published Qwen and Llama layouts use at most 4).
std::vector<std::pair<int, int>> tensorAndPipelineSizes(int devices) {
  std::vector<std::pair<int, int>> out;
  for (int pp : {1, 2, 4})
    for (int tp : divisorsOf(devices))
      if (devices % (tp * pp) == 0)
        out.emplace_back(tp, pp);
  return out;
}

// Micro-batches worth planning for `per_replica` sequences: the powers of
// two that divide it, and the whole share.
std::vector<int64_t> microBatchesOf(int64_t per_replica) {
  std::vector<int64_t> out;
  for (int64_t m = 1; m < per_replica && per_replica % m == 0; m *= 2)
    out.push_back(m);
  out.push_back(per_replica);
  return out;
}

// Fitting first, fastest first; then the others, smallest peak first.
bool better(const LayoutCandidate &a, const LayoutCandidate &b) {
  if (a.fits != b.fits)
    return a.fits;
  if (a.fits && a.time && b.time &&
      a.time->tokensPerSecondPerDevice() != b.time->tokensPerSecondPerDevice())
    return a.time->tokensPerSecondPerDevice() > b.time->tokensPerSecondPerDevice();
  return a.peak < b.peak;
}

// The most frugal layout of each tensor-parallel size (ZeRO-2, full
// recomputation, one sequence at a time): the smallest peak, first.
Expected<std::optional<LayoutCandidate>>
smallestLayout(const PlanRequest &request, const ResolvedJob &job, const KernelSettings &settings) {
  Planner planner(request, job, settings);
  std::optional<LayoutCandidate> best;
  for (int tp : divisorsOf(request.devices)) {
    const int zero = request.devices / tp > 1 ? 2 : 0;
    KILN_ASSIGN_OR_RETURN(std::optional<LayoutCandidate> c,
                          planner.plan(tp, 1, zero, RecomputeMode::Full, 1));
    if (c && (!best || c->peak < best->peak))
      best = std::move(c);
  }
  return best;
}

// What would make a model that fits no layout fit: more devices (the
// fewest doublings, up to 8x), LoRA, a shorter sequence (halved down to 256).
Expected<std::vector<std::string>> whatWouldFit(const PlanRequest &request, const ResolvedJob &job,
                                                const KernelSettings &settings) {
  std::vector<std::string> out;
  auto describe = [](const LayoutCandidate &c) {
    return c.trainFlags() + " (" + formatBytes(c.peak) + ")";
  };
  for (int devices = request.devices * 2;
       devices <= std::min(request.devices * 8, parallel::kMaxDevices); devices *= 2) {
    PlanRequest more = request;
    more.devices = devices;
    more.nodes = parallel::nodesFor(job.target, devices);
    KILN_ASSIGN_OR_RETURN(std::optional<LayoutCandidate> c, smallestLayout(more, job, settings));
    if (c && c->fits) {
      out.push_back(std::to_string(devices) + " devices: --devices " + std::to_string(devices) +
                    " " + describe(*c));
      break;
    }
  }
  if (!request.model.lora.enabled()) {
    PlanRequest lora = request;
    lora.model.lora.rank = 64;
    KILN_ASSIGN_OR_RETURN(std::optional<LayoutCandidate> c, smallestLayout(lora, job, settings));
    if (c && c->fits)
      out.push_back("LoRA (Qwen's recipe): --lora-rank 64 " + describe(*c));
  }
  for (int64_t shorter = request.model.seq / 2; shorter >= 256; shorter /= 2) {
    PlanRequest cut = request;
    cut.model.seq = shorter;
    KILN_ASSIGN_OR_RETURN(std::optional<LayoutCandidate> c, smallestLayout(cut, job, settings));
    if (c && c->fits) {
      out.push_back("a shorter sequence: --seq " + std::to_string(shorter) + " " + describe(*c));
      break;
    }
  }
  return out;
}

} // namespace

Expected<LayoutPlan> planLayouts(const PlanRequest &request, const ResolvedJob &job,
                                 const KernelSettings &settings) {
  const auto start = std::chrono::steady_clock::now();
  PlanRequest r = request;
  if (r.device_memory <= 0)
    r.device_memory = job.target.memory.hbm_bytes;
  if (r.nodes <= 0)
    r.nodes = parallel::nodesFor(job.target, r.devices);
  else if (r.devices % r.nodes != 0)
    return Error("--nodes " + std::to_string(r.nodes) + " does not split " +
                 std::to_string(r.devices) + " devices evenly");
  LayoutPlan plan;
  plan.nodes = r.nodes;
  plan.device_memory = r.device_memory;
  Planner planner(r, job, settings);
  size_t fitting = 0;
  auto add = [&](LayoutCandidate c) {
    fitting += c.fits;
    plan.candidates.push_back(std::move(c));
    progress::report("planning layouts: " + std::to_string(plan.candidates.size()) + " planned, " +
                     std::to_string(fitting) + " fit");
  };
  // Beside a plain pipeline: the interleaved schedule (two model stages a
  // device, Megatron's virtual stages) where the plain one fits, the
  // micro-batches are a multiple of the stages and the layers divide (it
  // holds more in flight, so it cannot fit where the plain one does not;
  // its bubble is half), and the layers split so that the first and last
  // stages, which also hold the embedding and lm_head, hold no more than
  // the others (MindFormers' offset), where that split is not the
  // balanced one.
  auto pipelineVariants = [&](int tp, int pp, int zero, RecomputeMode recompute, bool sp,
                              bool plain_fits) -> Status {
    const int64_t micro_batches = r.model.batch / (r.devices / (tp * pp));
    const parallel::TrainingProgram *plain = planner.plainStep(tp, pp, recompute, sp);
    if (!plain)
      return Status::ok();
    const int64_t layers = transformerLayersOf(*plain);
    if (plain_fits && micro_batches % pp == 0 && layers % (2 * pp) == 0) {
      KILN_ASSIGN_OR_RETURN(std::optional<LayoutCandidate> c,
                            planner.plan(tp, pp, zero, recompute, 1, sp, 2));
      if (c)
        add(std::move(*c));
    }
    const std::vector<int> evened = parallel::parameterEvenedStageLayers(*plain, layers, pp);
    const std::vector<int> balanced = [&] {
      std::vector<int> counts(pp, 0);
      for (int s : parallel::balancedLayerStages(layers, pp))
        ++counts[s];
      return counts;
    }();
    if (!evened.empty() && evened != balanced) {
      KILN_ASSIGN_OR_RETURN(std::optional<LayoutCandidate> c,
                            planner.plan(tp, pp, zero, recompute, 1, sp, 1, evened));
      if (c)
        add(std::move(*c));
    }
    return Status::ok();
  };
  for (const auto &[tp, pp] : tensorAndPipelineSizes(r.devices)) {
    const int dp = r.devices / (tp * pp);
    if (r.model.batch % dp != 0)
      continue;
    // Sequence parallelism wherever a tensor-parallel group splits the
    // sequence evenly: it holds no more than plain tensor parallelism and
    // moves the same bytes (its all-gather and reduce-scatter cost what
    // the all-reduce did), so the layouts without it are not planned
    // beside it, which keeps the search's size.
    const bool sp = tp > 1 && r.model.seq % tp == 0 && !r.model.lora.enabled();
    for (RecomputeMode recompute : kRecomputeModes) {
      if (r.recompute && *r.recompute != recompute)
        continue;
      for (int zero = 0; zero <= (dp == 1 ? 0 : pp > 1 ? 2 : 3); ++zero)
        for (int64_t micro : microBatchesOf(r.model.batch / dp)) {
          // A pipeline runs one sequence per micro-batch, as many as the
          // replica's share: the fewest idle slots (P - 1 of M + P - 1) and
          // the least held per micro-batch in flight. ZeRO-3, whose step is
          // its own per replica count, is planned with that micro-batch
          // too.
          if ((pp > 1 || zero == 3) && micro > 1)
            break;
          if (pp > 1 && r.model.batch / dp < pp)
            break;
          KILN_ASSIGN_OR_RETURN(std::optional<LayoutCandidate> c,
                                planner.plan(tp, pp, zero, recompute, micro, sp));
          if (!c)
            break;
          const bool fits = c->fits;
          add(std::move(*c));
          if (pp > 1)
            KILN_RETURN_IF_ERROR(pipelineVariants(tp, pp, zero, recompute, sp, fits));
          if (!fits) // a larger micro-batch needs more
            break;
        }
    }
  }
  if (plan.candidates.empty())
    return Error("no layout of " + std::to_string(r.devices) + " devices takes this model and a " +
                 "global batch of " + std::to_string(r.model.batch) +
                 (planner.firstFailure().empty() ? " (the batch must divide over the replicas)"
                                                 : ": " + planner.firstFailure()));
  std::stable_sort(plan.candidates.begin(), plan.candidates.end(), better);
  plan.no_time = planner.noTime();
  if (!plan.recommended()) {
    KILN_ASSIGN_OR_RETURN(plan.would_fit, whatWouldFit(r, job, settings));
  }
  plan.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return plan;
}

} // namespace kiln::driver
