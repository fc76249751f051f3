// The trainer's gradient sums and collectives: each micro-batch's gradient
// added into the device's f32 sums; across the data-parallel replicas each
// gradient summed, the losses and the float status, the global gradient
// norm's sum of squares from those sums (ZeRO's all-gather of the updated
// slices is zero_sharder.h's).
#include "runtime/gradient_norm.h"
#include "runtime/trainer.h"

namespace kiln::runtime {

Status Trainer::accumulateGradient(int d, size_t i, Tensor g, int k, bool keep_dtype) {
  sums_.add(d, i, std::move(g), k, keep_dtype);
  if (k > 0)
    return Status::ok();
  // A gradient that left the device as it was made lands on it as the
  // device's slice of the sum (ZeRO-2 and -3).
  const parallel::Parameter &p = program_.params[i];
  return memory_[d].allocate(program_.signature.gradient[i],
                             program_.parallel.gradientsLeaveWhenMade()
                                 ? p.slice * int64_t{4}
                                 : sums_.at(d, i).byteSize());
}

// Rank t's gradient of parameter i summed over the replicas in rank order,
// in f32, on every replica (the host's; with ZeRO-2 and -3 a device counts
// only its slice of it, accumulateGradient); on the first alone where only
// the first replica updates.
Status Trainer::reduceGradient(int t, size_t i) {
  std::vector<int> devices;
  for (int r = 0; r < comm_->localSize(); ++r)
    devices.push_back(deviceOfParam(r, i, t));
  return sums_.sumOverReplicas(*comm_, devices, i, sharedUpdate());
}

// The global gradient norm's sum of squares. Every replica holds the same
// sums, so one look at the first replica's ranks decides for all of them (a
// replicated parameter counts once, a key/value head replicated over the
// ranks that share it once). A pipeline spread over processes adds
// each process's squares (zero for the stages it does not hold) into the
// one list, so the squares are added in the same order either way.
Expected<double> Trainer::gradientSumOfSquares() {
  const int T = tp();
  std::vector<std::pair<int, size_t>> counted; // (rank, parameter)
  for (int t = 0; t < T; ++t)
    for (size_t i = 0; i < program_.params.size(); ++i)
      if (program_.params[i].split.firstCopy(t, T))
        counted.emplace_back(t, i);
  std::vector<double> squares(counted.size(), 0.0);
  std::vector<const Tensor *> tensors;
  std::vector<size_t> at;
  for (size_t k = 0; k < counted.size(); ++k)
    if (holdsParam(counted[k].second)) {
      tensors.push_back(
          &sums_.at(deviceOfParam(0, counted[k].second, counted[k].first), counted[k].second));
      at.push_back(k);
    }
  const std::vector<double> s = squaresOf(ThreadPool::shared(), tensors);
  for (size_t j = 0; j < at.size(); ++j)
    squares[at[j]] = s[j];
  if (link_)
    KILN_RETURN_IF_ERROR(link_->sum(squares));
  double sum = 0;
  for (double square : squares)
    sum += square;
  return sum;
}

// Sums the gradients of each tensor-parallel rank and the losses over the
// replicas, and the float status of every device in the job; whether any
// device's status was raised. Work shared by every device of the process is
// on the first one's track.
Expected<bool> Trainer::reduceAcrossReplicas(std::vector<float> &losses) {
  const int replicas = comm_->localSize(), T = tp();
  const int devices = layout_.devices();
  auto clock = Profiler::Clock::now();
  const int64_t t0 = trace_ ? trace_->now() : 0;
  for (int t = 0; t < T; ++t)
    for (size_t i = 0; i < program_.params.size(); ++i)
      if (holdsParam(i))
        KILN_RETURN_IF_ERROR(reduceGradient(t, i));
  // The float status of this process's devices, per replica.
  std::vector<float> raised(replicas, 0.0f);
  for (int r = 0; r < replicas; ++r)
    for (int s = layout_.firstStage(); s < layout_.firstStage() + layout_.localStages(); ++s)
      for (int t = 0; t < T; ++t)
        raised[r] =
            std::max(raised[r], float_status_[deviceOf(r, s, t)].overflowed() ? 1.0f : 0.0f);
  if (link_) {
    // Across the replica's processes: the last stage's loss, any status.
    std::vector<double> mine = {losses[0], raised[0]};
    KILN_RETURN_IF_ERROR(link_->sum(mine));
    losses[0] = static_cast<float>(mine[0]);
    raised[0] = mine[1] > 0 ? 1.0f : 0.0f;
  }
  std::vector<float *> loss_buffers;
  for (float &l : losses)
    loss_buffers.push_back(&l);
  KILN_RETURN_IF_ERROR(comm_->allReduceSum(loss_buffers, 1));
  // The float status of every device, in the job: how many replicas overflowed.
  std::vector<float *> raised_buffers;
  for (float &r : raised)
    raised_buffers.push_back(&r);
  KILN_RETURN_IF_ERROR(comm_->allReduceSum(raised_buffers, 1));
  if (trace_)
    for (int d = 0; d < devices; ++d)
      trace_->add(d, "allreduce", t0, trace_->now(), step_ + 1);
  profileHost(0, "allreduce", clock);
  return raised[0] > 0;
}

} // namespace kiln::runtime
