#include "runtime/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

#include "ir/float16.h"
#include "ir/float_status.h"
#include "runtime/checkpoint.h"
#include "support/thread_pool.h"

namespace kiln::runtime {
namespace {

int64_t bytesOf(const TensorType &t) {
  return numElements(t.shape) * static_cast<int64_t>(dtypeSize(t.dtype));
}

Tensor scalarF32(double v) { return Tensor::scalar(DType::F32, v); }

} // namespace

Trainer::Trainer(parallel::TrainingProgram program, const TrainerOptions &options,
                 std::unique_ptr<Communicator> communicator, const TokenData &data,
                 std::unique_ptr<StageLink> stages)
    : program_(std::move(program)), options_(options), comm_(std::move(communicator)),
      link_(std::move(stages)),
      layout_(program_.parallel.tp, program_.parallel.pp, comm_->firstLocalRank(),
              comm_->localSize(), link_ ? link_->processes() : 1, link_ ? link_->index() : 0),
      feed_(data, program_.signature, program_.batch_per_replica, program_.micro_batch,
            options.seed),
      schedule_(program_, layout_,
                {options.steps, !options.checkpoint_dir.empty(), options.checkpoint_every,
                 options.eval_data != nullptr, options.eval_every}),
      zero_(program_.params, program_.parallel.dp, program_.parallel.zero, layout_, *comm_),
      checkpoints_(program_, layout_, zero_, *comm_, link_.get()), scaler_(options.loss_scale) {}

std::string Trainer::deviceName(int device) const {
  return "npu:" + std::to_string(globalDevice(device));
}

Expected<std::unique_ptr<Trainer>>
Trainer::create(parallel::TrainingProgram program, const TrainerOptions &options,
                std::unique_ptr<Communicator> communicator, std::map<std::string, Tensor> weights,
                const TokenData &data, std::unique_ptr<StageLink> stages) {
  if (communicator->worldSize() != program.parallel.dp)
    return Error("the communicator has " + std::to_string(communicator->worldSize()) +
                 " replicas, the program was compiled for dp " +
                 std::to_string(program.parallel.dp));
  if (stages && (program.parallel.pp % stages->processes() != 0 || communicator->localSize() != 1))
    return Error("a pipeline of " + std::to_string(program.parallel.pp) +
                 " stages does not spread over " + std::to_string(stages->processes()) +
                 " processes of one replica each");
  std::unique_ptr<Trainer> t(
      new Trainer(std::move(program), options, std::move(communicator), data, std::move(stages)));
  KILN_RETURN_IF_ERROR(t->start(std::move(weights)));
  return t;
}

Status Trainer::start(std::map<std::string, Tensor> weights) {
  const parallel::DeviceMemoryEstimate &estimate = program_.memory;
  if (options_.device_memory > 0 && estimate.peak > options_.device_memory)
    return outOfDeviceMemory("npu:" + std::to_string(estimate.rank),
                             "the job needs " + formatBytes(estimate.peak) + " at its peak (step " +
                                 formatBytes(estimate.step_peak) + " + optimizer state " +
                                 formatBytes(estimate.optimizer_state) + "; update " +
                                 formatBytes(estimate.update_peak) + ")",
                             options_.device_memory, "the step's largest buffers",
                             estimate.largest);

  KILN_RETURN_IF_ERROR(createExecutors());
  const int devices = layout_.devices();
  const int64_t capacity =
      options_.device_memory > 0 ? options_.device_memory : std::numeric_limits<int64_t>::max();
  for (int d = 0; d < devices; ++d)
    memory_.emplace_back(deviceName(d), capacity);
  float_status_.resize(devices);
  weights_.resize(devices);
  moments_.resize(devices);
  sums_.reset(devices, program_.params.size());
  if (!options_.trace_path.empty())
    trace_ = std::make_unique<Trace>(devices);
  KILN_RETURN_IF_ERROR(startProfiler());
  std::string resume_path;
  if (options_.resume && !options_.checkpoint_dir.empty()) {
    KILN_ASSIGN_OR_RETURN(
        resume_path, CheckpointIO::resumePoint(options_.checkpoint_dir, options_.resume_if_exists));
  }
  KILN_RETURN_IF_ERROR(placeWeights(weights, resume_path.empty()));
  if (!resume_path.empty())
    KILN_RETURN_IF_ERROR(resume(resume_path));
  makeWeightCopies();
  return Status::ok();
}

// The compute copies of the weights as placed or resumed: the Cast the
// step would make, rounded as its kernels round (INFNAN mode, the only one
// with copies). Updates write them from then on. The replicas of a
// tensor-parallel rank hold the same piece (copies are only kept without
// ZeRO), so they share one copy, as they share the update's results.
void Trainer::makeWeightCopies() {
  for (size_t i = 0; i < program_.params.size(); ++i) {
    const parallel::Parameter &p = program_.params[i];
    if (!p.copy_dtype)
      continue;
    std::map<int, Tensor> of_rank;
    for (int d = 0; d < layout_.devices(); ++d) {
      if (stageOf(d) != p.stage)
        continue;
      auto [made, fresh] = of_rank.try_emplace(tpRankOf(d));
      if (fresh)
        made->second = weights_[d].at(p.name).castTo(*p.copy_dtype, OverflowMode::InfNan);
      weights_[d][program_.signature.weight_copy[i]] = made->second;
    }
  }
}

// The executors of the step (or its stages) and of the update buckets.
Status Trainer::createExecutors() {
  // What the trainer keeps on the devices is read where it is; the rest of
  // a run's inputs (tokens, scalars, pipeline transfers) the device
  // receives into its arena, as the plan counts it.
  ExecutorOptions update_options;
  update_options.input_in_place = [held = program_.heldBuffers()](const GraphInput &in) {
    return held.count(in.name) > 0;
  };
  ExecutorOptions step_options = update_options;
  if (zero_.weightsSliced())
    step_options.gather_weight = [this](const std::string &name, int rank) {
      return zero_.gatherWeight(name, rank);
    };
  if (program_.parallel.gradientsLeaveWhenMade())
    step_options.output_leaves = [this](const GraphOutput &out) {
      return gradient_of_.count(out.name) > 0;
    };
  for (size_t i = 0; i < program_.params.size(); ++i)
    gradient_of_[program_.signature.gradient[i]] = i;
  if (program_.stages.empty()) {
    KILN_ASSIGN_OR_RETURN(
        step_executor_, Executor::create(program_.step.graph, program_.step.kernels, step_options));
  }
  for (const parallel::CompiledGraph *g : program_.stepPrograms())
    if (!program_.stages.empty()) {
      KILN_ASSIGN_OR_RETURN(auto ex, Executor::create(g->graph, g->kernels, step_options));
      stage_executors_.push_back(std::move(ex));
    }
  for (const parallel::CompiledGraph &g : program_.optimizers) {
    KILN_ASSIGN_OR_RETURN(auto ex, Executor::create(g.graph, g.kernels, update_options));
    update_executors_.push_back(std::move(ex));
  }
  ExecutorOptions eval_options = step_options;
  eval_options.output_leaves = nullptr; // a forward makes no gradient
  return createEvalExecutors(eval_options);
}

Status Trainer::startProfiler() {
  if (options_.profile_dir.empty())
    return Status::ok();
  KILN_RETURN_IF_ERROR(createProfileDir(options_.profile_dir));
  profiler_ = std::make_unique<Profiler>(measureHostRoofline(ThreadPool::shared()));
  if (program_.stages.empty())
    step_program_ = profiler_->addProgram("step", program_.step.graph, program_.step.kernels);
  for (size_t i = 0; i < stage_executors_.size(); ++i) {
    const parallel::CompiledGraph &g = program_.stages[i / 2].program(i % 2 == 0);
    stage_programs_.push_back(profiler_->addProgram("stage" + std::to_string(i / 2) +
                                                        (i % 2 == 0 ? ".forward" : ".backward"),
                                                    g.graph, g.kernels));
  }
  for (size_t i = 0; i < program_.optimizers.size(); ++i)
    update_programs_.push_back(profiler_->addProgram(
        "update" + (program_.optimizers.size() == 1 ? "" : "." + std::to_string(i)),
        program_.optimizers[i].graph, program_.optimizers[i].kernels));
  return Status::ok();
}

// Each device's weights and moments from `weights` (`fresh`: a new run; a
// resumed run reads the trained ones from its checkpoint), counted on it.
Status Trainer::placeWeights(const std::map<std::string, Tensor> &weights, bool fresh) {
  const int devices = static_cast<int>(weights_.size());
  // Every device's piece of weight `name` from `weights`, in its dtype, on
  // the devices of pipeline stage `stage`; with ZeRO-3 (`sliced`) its
  // replica's slice of the piece, the whole piece on the host.
  auto place = [&](const std::string &name, const TensorType &type, const TensorSplit &split,
                   int stage, bool sliced) -> Status {
    auto it = weights.find(name);
    if (it == weights.end())
      return Error("no initial value for parameter '" + name + "'");
    const Expected<Shape> piece = splitShape(it->second.shape(), split, tp());
    if (!piece || *piece != type.shape)
      return Error("parameter '" + name + "': the weights have shape " +
                   shapeToString(it->second.shape()) + ", the model needs " +
                   shapeToString(joinedShape(type.shape, split, tp())));
    for (int d = 0; d < devices; ++d) {
      if (stageOf(d) != stage)
        continue;
      Tensor mine = takeShard(it->second, split, tpRankOf(d), tp());
      if (mine.dtype() != type.dtype)
        mine = mine.castTo(type.dtype);
      if (sliced) {
        zero_.holdWhole(tpRankOf(d), name, mine);
        mine = zero_.sliceOf(mine, d);
      }
      weights_[d][name] = std::move(mine);
    }
    return Status::ok();
  };
  // Checkpoints hold what is trained; the frozen base always comes from `weights`.
  for (const parallel::Parameter &p : program_.frozen) {
    KILN_RETURN_IF_ERROR(place(p.name, p.type, p.split, p.stage, false));
    for (int d = 0; d < devices; ++d)
      if (stageOf(d) == p.stage)
        KILN_RETURN_IF_ERROR(memory_[d].allocate(p.name, bytesOf(p.type)));
  }
  for (size_t i = 0; i < program_.params.size(); ++i) {
    const parallel::Parameter &p = program_.params[i];
    const std::string &m = program_.signature.moment[i], &v = program_.signature.velocity[i];
    const std::string &copy = program_.signature.weight_copy[i];
    param_of_[p.name] = param_of_[m] = param_of_[v] = i;
    if (!copy.empty())
      param_of_[copy] = i;
    if (fresh)
      KILN_RETURN_IF_ERROR(place(p.name, p.type, p.split, p.stage, p.weight_sliced));
    const TensorType moment{DType::F32, p.sliceType().shape};
    for (int d = 0; d < devices; ++d) {
      if (stageOf(d) != p.stage)
        continue;
      KILN_RETURN_IF_ERROR(memory_[d].allocate(p.name, bytesOf(p.heldType())));
      if (!copy.empty())
        KILN_RETURN_IF_ERROR(memory_[d].allocate(copy, p.copyBytes()));
      moments_[d][m] = Tensor(moment);
      moments_[d][v] = Tensor(moment);
      KILN_RETURN_IF_ERROR(memory_[d].allocate(m, bytesOf(moment)));
      KILN_RETURN_IF_ERROR(memory_[d].allocate(v, bytesOf(moment)));
    }
  }
  return Status::ok();
}

Status Trainer::run(const std::function<Status(const StepRecord &)> &on_step) {
  while (step_ < options_.steps) {
    KILN_ASSIGN_OR_RETURN(StepRecord record, step());
    if (schedule_.cadence().validateAfter(step_)) {
      KILN_ASSIGN_OR_RETURN(record.validation, validate());
    }
    KILN_RETURN_IF_ERROR(on_step(record));
    if (schedule_.cadence().checkpointAfter(step_))
      KILN_RETURN_IF_ERROR(checkpoint());
  }
  if (trace_)
    KILN_RETURN_IF_ERROR(trace_->write(options_.trace_path));
  if (profiler_)
    KILN_RETURN_IF_ERROR(profiler_->finish(options_.profile_dir, ThreadPool::shared()));
  return Status::ok();
}

void Trainer::profileHost(int device, const char *what, Profiler::Clock::time_point start) {
  if (profiler_)
    profiler_->host(step_ + 1, globalDevice(device), what, start, Profiler::Clock::now());
}

// Local replica `r`'s forward and backward over its micro-batches, its
// ranks in lockstep: the micro-batches' losses summed into `loss`, their
// gradients summed in f32 into the sums of the replica's devices.
Status Trainer::forwardBackward(int r, double scale, float &loss) {
  if (!program_.stages.empty())
    return pipelineForwardBackward(r, scale, loss);
  const int T = tp();
  const int first = deviceOf(r, 0, 0);
  const int64_t t0 = trace_ ? trace_->now() : 0;
  loss = 0;
  for (int k = 0; k < schedule_.microBatches(); ++k) {
    auto clock = Profiler::Clock::now();
    const ops::TensorMap common = microBatchInputs(r, k, scale);
    std::vector<ops::TensorMap> inputs(T);
    std::vector<const ops::TensorMap *> group;
    std::vector<DeviceMemory *> memory;
    std::vector<FloatStatus *> status;
    for (int t = 0; t < T; ++t) {
      inputs[t] = weights_[first + t];
      inputs[t].insert(common.begin(), common.end());
      if (!program_.signature.tensor_parallel_rank.empty())
        inputs[t][program_.signature.tensor_parallel_rank] = Tensor::fromInts(DType::I64, {}, {t});
      group.push_back(&inputs[t]);
      memory.push_back(&memory_[first + t]);
      status.push_back(&float_status_[first + t]);
    }
    profileHost(first, "batch and inputs", clock);
    if (profiler_) {
      std::vector<int> ranks(T);
      for (int t = 0; t < T; ++t)
        ranks[t] = globalDevice(first + t);
      step_executor_->profileInto({profiler_.get(), step_program_, step_ + 1, ranks});
    }
    auto outputs = step_executor_->runGroup(group, memory, status);
    clock = Profiler::Clock::now();
    if (!outputs)
      return outputs.error().withContext(
          (T == 1 ? deviceName(first) : deviceName(first) + ".." + deviceName(first + T - 1)) +
          ", step " + std::to_string(step_ + 1));
    loss += static_cast<float>(outputs->front().at("loss").getFloat(0));
    // ZeRO-2 sums each gradient in f32 (step()); until then the host holds
    // the step's own gradient, in its dtype.
    const bool keep_dtype = program_.parallel.zero >= 2 && program_.parallel.grad_accum == 1;
    for (int t = 0; t < T; ++t)
      for (size_t i = 0; i < program_.params.size(); ++i)
        KILN_RETURN_IF_ERROR(accumulateGradient(
            first + t, i, std::move((*outputs)[t].at(program_.signature.gradient[i])), k,
            keep_dtype));
    profileHost(first, "gradients out", clock);
  }
  if (trace_)
    for (int t = 0; t < T; ++t)
      trace_->add(first + t, "forward+backward", t0, trace_->now(), step_ + 1);
  return Status::ok();
}

// The overflow test hook: the first gradient element of the last replica's
// first device overflows before the reduction.
void Trainer::injectOverflow() {
  const int device = deviceOfParam(comm_->localSize() - 1, 0, 0);
  // As a kernel of that device would overflow: inf in INFNAN mode; in
  // saturation mode f16's largest finite value (a finite gradient that
  // nothing but the device's status tells apart).
  Tensor &first = sums_.at(device, 0);
  if (first.dtype() != DType::F32) // ZeRO-2 keeps the step's dtype until the reduction
    first = first.castTo(DType::F32);
  float &g = first.dataAs<float>()[0];
  if (program_.stepPrograms().front()->kernels.overflow == OverflowMode::Saturation) {
    g = kF16Max;
    float_status_[device].raise(kFloatStatusOverflow);
  } else {
    g = std::numeric_limits<float>::infinity();
  }
}

Expected<StepRecord> Trainer::step() {
  const auto started = std::chrono::steady_clock::now();
  const uint64_t copied_before = Tensor::bytesCopied();
  const uint64_t allocated_before = Tensor::bytesAllocated();
  const int replicas = comm_->localSize();
  const int devices = layout_.devices();
  const int64_t per_replica = program_.batch_per_replica;
  const double scale = scaler_.scale();
  const double lr = options_.schedule.at(step_);

  // Forward and backward on every replica, one after another; the ranks of
  // a replica in lockstep.
  std::vector<float> losses(replicas);
  // NPUClearFloatStatus before the step, NPUGetFloatStatus after it.
  for (FloatStatus &status : float_status_)
    status.clear();
  for (int r = 0; r < replicas; ++r)
    KILN_RETURN_IF_ERROR(forwardBackward(r, scale, losses[r]));
  if (step_ == options_.inject_overflow_step &&
      comm_->firstLocalRank() + replicas == comm_->worldSize() && holdsParam(0))
    injectOverflow();
  KILN_ASSIGN_OR_RETURN(const bool raised, reduceAcrossReplicas(losses));

  // The gradients and losses are sums of one mean per micro-batch of every replica.
  const double means = program_.parallel.dp * program_.parallel.grad_accum;
  const auto clock = Profiler::Clock::now();
  KILN_ASSIGN_OR_RETURN(const double sum_squares, gradientSumOfSquares());
  // A set status (saturation mode's only sign), or a gradient that is not
  // finite (INFNAN mode, or the f32 sum itself overflowing).
  const bool overflow = raised || !std::isfinite(sum_squares);
  profileHost(0, "gradient norm", clock);
  StepRecord rec;
  rec.step = step_ + 1;
  rec.loss = losses[0] / means;
  rec.loss_scale = scale;
  rec.lr = lr;
  rec.overflow = overflow;
  rec.grad_norm =
      overflow ? std::numeric_limits<double>::infinity() : std::sqrt(sum_squares) / (scale * means);
  if (!overflow) {
    const double clip = options_.clip_grad_norm > 0 && rec.grad_norm > options_.clip_grad_norm
                            ? options_.clip_grad_norm / (rec.grad_norm + 1e-6)
                            : 1.0;
    KILN_RETURN_IF_ERROR(updateDevices(clip / (scale * means), lr));
    if (zero_.stage() >= 1) {
      const auto gathered = Profiler::Clock::now();
      KILN_RETURN_IF_ERROR(zero_.allGather(weights_));
      profileHost(0, "all-gather", gathered);
    }
    ++updates_;
  }
  for (int d = 0; d < devices; ++d)
    for (const std::string &grad : program_.signature.gradient)
      memory_[d].release(grad);
  KILN_RETURN_IF_ERROR(scaler_.update(overflow));
  const auto finished = std::chrono::steady_clock::now();
  if (profiler_)
    profiler_->stepTime(step_ + 1, started, finished, Tensor::bytesCopied() - copied_before,
                        Tensor::bytesAllocated() - allocated_before);
  ++step_;
  rec.seconds = std::chrono::duration<double>(finished - started).count();
  rec.tokens_per_s =
      static_cast<double>(per_replica * program_.parallel.dp * program_.seq) / rec.seconds;
  return rec;
}

// Every local device's update. Without ZeRO the replicas of a process hold
// the same weights and moments, and only the first replica's devices hold
// the summed gradients (reduceGradient), so they update and the others take
// their results: the host computes once what each simulated device would
// compute alike, and each device still counts the memory its update would
// have used (it is in the state the first replica's device was in).
Status Trainer::updateDevices(double grad_scale, double lr) {
  const int per_replica = tp() * layout_.localStages();
  const bool shared = sharedUpdate();
  // The replicas that take the first one's results let go of the weights
  // and moments they share with it, so that its update may write over them.
  if (shared)
    for (int d = per_replica; d < layout_.devices(); ++d) {
      for (auto &[name, weight] : weights_[d])
        weight = Tensor();
      for (auto &[name, moment] : moments_[d])
        moment = Tensor();
    }
  std::vector<DeviceMemory> before;
  for (int d = 0; d < layout_.devices(); ++d) {
    const int source = shared ? d % per_replica : d;
    if (source == d) {
      if (shared)
        before.push_back(memory_[d]);
      KILN_RETURN_IF_ERROR(update(d, grad_scale, lr));
      continue;
    }
    if (!memory_[d].sameAs(before[source]))
      return Error(deviceName(d) + ": holds other buffers than " + deviceName(source) +
                   " before the update it takes from it (an internal error)");
    weights_[d] = weights_[source];
    moments_[d] = moments_[source];
    memory_[d].countAs(memory_[source]);
  }
  return Status::ok();
}

// Device `device`'s AdamW update of (its piece of) the parameters its
// replica owns, bucket by bucket: each bucket's new weights and moments
// replace the old ones before the next bucket runs.
Status Trainer::update(int device, double grad_scale, double lr) {
  const int64_t t0 = trace_ ? trace_->now() : 0;
  const parallel::TrainingSignature &sig = program_.signature;
  for (size_t b = 0; b < program_.optimizers.size(); ++b) {
    if (program_.bucket_stage[b] != stageOf(device))
      continue; // another pipeline stage's parameters
    const auto clock = Profiler::Clock::now();
    ops::TensorMap inputs;
    inputs[sig.adam_step] = Tensor::fromInts(DType::I64, {}, {updates_});
    inputs[sig.learning_rate] = scalarF32(lr);
    inputs[sig.grad_scale] = scalarF32(grad_scale);
    // The weights and moments are handed over (their outputs replace them),
    // so that the update may write over them (Executor::runDonating).
    for (size_t i : program_.bucket_params[b]) {
      const parallel::Parameter &p = program_.params[i];
      // With ZeRO the device's slices of the weight and the summed gradient;
      // ZeRO-1 and -2 keep the whole weight and update a slice of it.
      Tensor &weight = weights_[device][p.name];
      const bool whole = p.weight_sliced || p.slice == 0;
      inputs[p.name] = whole ? std::move(weight) : zero_.updateInput(i, weight, device);
      inputs[sig.gradient[i]] = zero_.updateInput(i, sums_.at(device, i), device);
      inputs[sig.moment[i]] = std::move(moments_[device][sig.moment[i]]);
      inputs[sig.velocity[i]] = std::move(moments_[device][sig.velocity[i]]);
      // The old compute copy, which the new one is written over.
      if (!sig.weight_copy[i].empty())
        inputs[sig.weight_copy[i]] = std::move(weights_[device][sig.weight_copy[i]]);
    }
    profileHost(device, "update inputs", clock);
    if (profiler_)
      update_executors_[b]->profileInto(
          {profiler_.get(), update_programs_[b], step_ + 1, {globalDevice(device)}});
    auto outputs = update_executors_[b]->runDonating(std::move(inputs), &memory_[device]);
    if (!outputs)
      return outputs.error().withContext(deviceName(device) + ", update");
    for (auto &[name, t] : *outputs) {
      if (name == sig.adam_step)
        continue;
      if (moments_[device].count(name)) {
        moments_[device][name] = std::move(t);
      } else {
        const parallel::Parameter &p = program_.params[param_of_.at(name)];
        // ZeRO-1 and -2: the new slice, gathered into the weight after every update.
        if (p.slice > 0 && !p.weight_sliced)
          zero_.keepUpdated(device, name, std::move(t));
        else
          weights_[device][name] = std::move(t);
      }
    }
  }
  if (trace_)
    trace_->add(device, "update", t0, trace_->now(), step_ + 1);
  return Status::ok();
}

} // namespace kiln::runtime
