#include "runtime/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

#include "compiler/autodiff/training_step.h"
#include "runtime/checkpoint.h"

namespace kiln::runtime {
namespace {

int64_t bytesOf(const TensorType &t) {
  return numElements(t.shape) * static_cast<int64_t>(dtypeSize(t.dtype));
}

Tensor scalarF32(double v) { return Tensor::scalar(DType::F32, v); }

} // namespace

nlohmann::json StepRecord::toJson() const {
  auto number = [](double v) -> nlohmann::json {
    return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
  };
  return {{"step", step},
          {"loss", number(loss)},
          {"loss_scale", loss_scale},
          {"grad_norm", number(grad_norm)},
          {"lr", lr},
          {"overflow", overflow},
          {"seconds", seconds},
          {"tokens_per_s", tokens_per_s}};
}

std::string StepRecord::toText(int64_t steps) const {
  char buf[200];
  std::snprintf(buf, sizeof(buf),
                "step %lld/%lld  loss %.4f  loss scale %.0f  grad norm %.4g  lr %.3g  %.0f "
                "tokens/s%s",
                static_cast<long long>(step), static_cast<long long>(steps), loss, loss_scale,
                grad_norm, lr, tokens_per_s,
                overflow ? "  overflow: update skipped on every device" : "");
  return buf;
}

Trainer::Trainer(parallel::TrainingProgram program, const TrainerOptions &options,
                 std::unique_ptr<Communicator> communicator, const TokenData &data)
    : program_(std::move(program)), options_(options), comm_(std::move(communicator)), data_(data),
      scaler_(options.loss_scale) {}

std::string Trainer::deviceName(int local) const {
  return "npu:" + std::to_string(comm_->firstLocalRank() + local);
}

Expected<std::unique_ptr<Trainer>> Trainer::create(parallel::TrainingProgram program,
                                                   const TrainerOptions &options,
                                                   std::unique_ptr<Communicator> communicator,
                                                   std::map<std::string, Tensor> weights,
                                                   const TokenData &data) {
  if (communicator->worldSize() != program.parallel.dp)
    return Error("the communicator has " + std::to_string(communicator->worldSize()) +
                 " replicas, the program was compiled for dp " +
                 std::to_string(program.parallel.dp));
  std::unique_ptr<Trainer> t(
      new Trainer(std::move(program), options, std::move(communicator), data));
  KILN_RETURN_IF_ERROR(t->start(std::move(weights)));
  return t;
}

Status Trainer::start(std::map<std::string, Tensor> weights) {
  const parallel::DeviceMemoryEstimate &estimate = program_.memory;
  if (options_.device_memory > 0 && estimate.peak > options_.device_memory) {
    std::string top;
    for (const auto &[name, bytes] : estimate.largest)
      top += "\n    " + name + ": " + formatBytes(bytes);
    return Error("npu:" + std::to_string(estimate.rank) + ": out of device memory: the job needs " +
                 formatBytes(estimate.peak) + " at its peak (step " +
                 formatBytes(estimate.step_peak) + " + optimizer state " +
                 formatBytes(estimate.optimizer_state) + "; update " +
                 formatBytes(estimate.update_peak) + "), the device has " +
                 formatBytes(options_.device_memory) + "; the step's largest buffers:" + top +
                 "\n  lower --batch or --seq, use more devices or --zero 1, or raise "
                 "--device-memory");
  }

  const int local = comm_->localSize();
  KILN_ASSIGN_OR_RETURN(step_executor_,
                        Executor::create(program_.step.graph, program_.step.kernels));
  for (const parallel::CompiledGraph &g : program_.optimizers) {
    KILN_ASSIGN_OR_RETURN(auto ex, Executor::create(g.graph, g.kernels));
    update_executors_.push_back(std::move(ex));
  }
  const int64_t capacity =
      options_.device_memory > 0 ? options_.device_memory : std::numeric_limits<int64_t>::max();
  for (int d = 0; d < local; ++d)
    memory_.emplace_back(deviceName(d), capacity);
  weights_.resize(local);
  moments_.resize(local);
  grads_.assign(local, std::vector<Tensor>(program_.params.size()));
  if (!options_.trace_path.empty())
    trace_ = std::make_unique<Trace>(local);

  std::string resume_path;
  if (options_.resume && !options_.checkpoint_dir.empty()) {
    KILN_ASSIGN_OR_RETURN(auto latest, latestCheckpoint(options_.checkpoint_dir));
    if (latest)
      resume_path = *latest;
  }
  for (size_t i = 0; i < program_.params.size(); ++i) {
    const auto &[name, type] = program_.params[i];
    auto it = weights.find(name);
    if (resume_path.empty() && it == weights.end())
      return Error("no initial value for parameter '" + name + "'");
    const TensorType moment{DType::F32, type.shape};
    for (int d = 0; d < local; ++d) {
      if (resume_path.empty()) {
        if (it->second.shape() != type.shape)
          return Error("parameter '" + name + "': the weights have shape " +
                       shapeToString(it->second.shape()) + ", the model needs " +
                       shapeToString(type.shape));
        weights_[d][name] =
            it->second.dtype() == type.dtype ? it->second : it->second.castTo(type.dtype);
      }
      KILN_RETURN_IF_ERROR(memory_[d].allocate(name, bytesOf(type)));
      const int owner = program_.owner[i];
      if (owner == -1 || owner == comm_->firstLocalRank() + d) {
        moments_[d][autodiff::adamMomentName(name)] = Tensor(moment);
        moments_[d][autodiff::adamVelocityName(name)] = Tensor(moment);
        KILN_RETURN_IF_ERROR(memory_[d].allocate(autodiff::adamMomentName(name), bytesOf(moment)));
        KILN_RETURN_IF_ERROR(
            memory_[d].allocate(autodiff::adamVelocityName(name), bytesOf(moment)));
      }
    }
  }
  if (!resume_path.empty())
    KILN_RETURN_IF_ERROR(resume(resume_path));
  return Status::ok();
}

Status Trainer::resume(const std::string &path) {
  KILN_ASSIGN_OR_RETURN(TrainingState state, readCheckpoint(path));
  for (const auto &[name, type] : program_.params) {
    auto it = state.weights.find(name);
    if (it == state.weights.end())
      return Error(path + ": no weights for parameter '" + name + "'");
    if (it->second.type() != type)
      return Error(path + ": '" + name + "' is " + typeToString(it->second.type()) +
                   ", the model needs " + typeToString(type));
    for (ops::TensorMap &w : weights_)
      w[name] = it->second;
  }
  for (ops::TensorMap &mine : moments_)
    for (auto &[name, t] : mine) {
      auto it = state.moments.find(name);
      if (it == state.moments.end() || it->second.type() != t.type())
        return Error(path + ": no " + typeToString(t.type()) + " optimizer state '" + name + "'");
      t = it->second;
    }
  step_ = state.step;
  updates_ = state.updates;
  options_.seed = state.seed; // the data continues as it began
  scaler_.restore(state.loss_scale, state.good_steps, state.overflows_in_a_row);
  resumed_from_ = path;
  return Status::ok();
}

Status Trainer::run(const std::function<Status(const StepRecord &)> &on_step) {
  while (step_ < options_.steps) {
    KILN_ASSIGN_OR_RETURN(StepRecord record, step());
    KILN_RETURN_IF_ERROR(on_step(record));
    const bool last = step_ == options_.steps;
    if (!options_.checkpoint_dir.empty() &&
        (last || (options_.checkpoint_every > 0 && step_ % options_.checkpoint_every == 0)))
      KILN_RETURN_IF_ERROR(checkpoint());
  }
  if (trace_)
    KILN_RETURN_IF_ERROR(trace_->write(options_.trace_path));
  return Status::ok();
}

Expected<StepRecord> Trainer::step() {
  const auto started = std::chrono::steady_clock::now();
  const int local = comm_->localSize();
  const int64_t per_replica = program_.batch_per_replica;
  const double scale = scaler_.scale();
  const double lr = options_.schedule.at(step_);

  // Forward and backward on every replica, one after another.
  std::vector<float> losses(local);
  for (int d = 0; d < local; ++d) {
    const int64_t t0 = trace_ ? trace_->now() : 0;
    ops::TensorMap inputs = weights_[d];
    const int rank = comm_->firstLocalRank() + d;
    Tensor ids = data_.batch(options_.seed, step_, rank * per_replica, per_replica);
    inputs["input_ids"] = ids;
    inputs["labels"] = ids;
    inputs[autodiff::kLossScaleName] = scalarF32(scale);
    auto outputs = step_executor_->run(inputs, &memory_[d]);
    if (!outputs)
      return outputs.error().withContext(deviceName(d) + ", step " + std::to_string(step_ + 1));
    losses[d] = static_cast<float>(outputs->at("loss").getFloat(0));
    for (size_t i = 0; i < program_.params.size(); ++i) {
      const std::string grad = autodiff::gradientName(program_.params[i].first);
      Tensor &g = outputs->at(grad);
      grads_[d][i] = g.dtype() == DType::F32 ? std::move(g) : g.castTo(DType::F32);
      KILN_RETURN_IF_ERROR(memory_[d].allocate(grad, grads_[d][i].byteSize()));
    }
    if (trace_)
      trace_->add(d, "forward+backward", t0, trace_->now(), step_ + 1);
  }
  if (step_ == options_.inject_overflow_step &&
      comm_->firstLocalRank() + local == comm_->worldSize())
    grads_[local - 1][0].dataAs<float>()[0] = std::numeric_limits<float>::infinity();

  // Sum the gradients (and the losses) over every replica.
  const int64_t t0 = trace_ ? trace_->now() : 0;
  for (size_t i = 0; i < program_.params.size(); ++i) {
    std::vector<float *> buffers;
    for (int d = 0; d < local; ++d)
      buffers.push_back(grads_[d][i].dataAs<float>());
    KILN_RETURN_IF_ERROR(comm_->allReduceSum(buffers, grads_[0][i].numElements()));
  }
  std::vector<float *> loss_buffers;
  for (float &l : losses)
    loss_buffers.push_back(&l);
  KILN_RETURN_IF_ERROR(comm_->allReduceSum(loss_buffers, 1));
  if (trace_)
    for (int d = 0; d < local; ++d)
      trace_->add(d, "allreduce", t0, trace_->now(), step_ + 1);

  // Every replica holds the same sums: one look decides for all of them.
  const double dp = program_.parallel.dp;
  double sum_squares = 0;
  bool overflow = false;
  for (const Tensor &g : grads_[0]) {
    const float *p = g.dataAs<float>();
    for (int64_t k = 0; k < g.numElements(); ++k) {
      overflow = overflow || !std::isfinite(p[k]);
      sum_squares += static_cast<double>(p[k]) * p[k];
    }
  }
  StepRecord r;
  r.step = step_ + 1;
  r.loss = losses[0] / dp;
  r.loss_scale = scale;
  r.lr = lr;
  r.overflow = overflow;
  r.grad_norm =
      overflow ? std::numeric_limits<double>::infinity() : std::sqrt(sum_squares) / (scale * dp);
  if (!overflow) {
    const double clip = options_.clip_grad_norm > 0 && r.grad_norm > options_.clip_grad_norm
                            ? options_.clip_grad_norm / (r.grad_norm + 1e-6)
                            : 1.0;
    for (int d = 0; d < local; ++d)
      KILN_RETURN_IF_ERROR(update(d, clip / (scale * dp), lr));
    // ZeRO-1: each parameter's owner sends the updated weights to the others.
    for (size_t i = 0; i < program_.params.size(); ++i) {
      if (program_.owner[i] == -1)
        continue;
      const std::string &name = program_.params[i].first;
      std::vector<void *> buffers;
      for (int d = 0; d < local; ++d)
        buffers.push_back(weights_[d][name].data());
      KILN_RETURN_IF_ERROR(
          comm_->broadcast(buffers, weights_[0][name].byteSize(), program_.owner[i]));
    }
    ++updates_;
  }
  for (int d = 0; d < local; ++d)
    for (const auto &[name, type] : program_.params)
      memory_[d].release(autodiff::gradientName(name));
  KILN_RETURN_IF_ERROR(scaler_.update(overflow));
  ++step_;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  r.tokens_per_s =
      static_cast<double>(per_replica * program_.parallel.dp * program_.seq) / r.seconds;
  return r;
}

// Replica `local`'s AdamW update of the parameters it owns.
Status Trainer::update(int local, double grad_scale, double lr) {
  const int64_t t0 = trace_ ? trace_->now() : 0;
  const int rank = comm_->firstLocalRank() + local;
  const size_t which = program_.optimizers.size() == 1 ? 0 : static_cast<size_t>(rank);
  ops::TensorMap inputs = moments_[local];
  inputs[autodiff::kAdamStepName] = Tensor::fromInts(DType::I64, {}, {updates_});
  inputs[autodiff::kLearningRateName] = scalarF32(lr);
  inputs[autodiff::kGradScaleName] = scalarF32(grad_scale);
  for (size_t i = 0; i < program_.params.size(); ++i) {
    if (program_.owner[i] != -1 && program_.owner[i] != rank)
      continue;
    const std::string &name = program_.params[i].first;
    inputs[name] = weights_[local][name];
    inputs[autodiff::gradientName(name)] = grads_[local][i];
  }
  auto outputs = update_executors_[which]->run(inputs, &memory_[local]);
  if (!outputs)
    return outputs.error().withContext(deviceName(local) + ", update");
  for (auto &[name, t] : *outputs) {
    if (name == autodiff::kAdamStepName)
      continue;
    if (moments_[local].count(name))
      moments_[local][name] = std::move(t);
    else
      weights_[local][name] = std::move(t);
  }
  if (trace_)
    trace_->add(local, "update", t0, trace_->now(), step_ + 1);
  return Status::ok();
}

Status Trainer::checkpoint() {
  // With ZeRO-1 each parameter's moments live on its owner; this process
  // holds them all when it drives every replica.
  TrainingState state;
  state.step = step_;
  state.updates = updates_;
  state.loss_scale = scaler_.scale();
  state.good_steps = scaler_.goodSteps();
  state.overflows_in_a_row = scaler_.overflowsInARow();
  state.seed = options_.seed;
  state.weights = std::map<std::string, Tensor>(weights_[0].begin(), weights_[0].end());
  for (const ops::TensorMap &mine : moments_)
    for (const auto &[name, t] : mine)
      state.moments.emplace(name, t);
  return writeCheckpoint(options_.checkpoint_dir, state).status();
}

} // namespace kiln::runtime
