// The trainer's pipeline: a replica's micro-batches through its model stages
// in the 1F1B schedule's one global order (step_schedule.h; interleaved with
// virtual stages), which the memory plan walks too.
// Model stage s runs on the devices of pipeline rank s % P. What a program
// hands another (an activation down the pipeline, a gradient up it, a stash
// for the stage's own backward) is held on the receiving rank's devices, named
// "mb<k>:<transfer>", from the program that gives it to the last one that
// reads it; in the process it is handed over without a copy, to a stage in
// another process (StageLink) it is sent when made and received when first
// read. The trace shows each device's actions where devices running at once
// would run them.
#include <optional>
#include <set>
#include <utility>

#include "runtime/trainer.h"

namespace kiln::runtime {
namespace {

std::string heldName(int micro, const std::string &transfer) {
  return "mb" + std::to_string(micro) + ":" + transfer;
}

} // namespace

// One replica's pass through its pipeline in one step: what is held between
// its actions.
class Trainer::PipelineRun {
public:
  PipelineRun(Trainer &trainer, int replica, double scale)
      : t_(trainer), r_(replica), scale_(scale), T_(trainer.tp()) {}

  Status action(const parallel::PipelineAction &a, float &loss);
  Status finish() { return t_.link_ ? t_.link_->finishSends() : Status::ok(); }

private:
  // A transfer of one micro-batch while some program still has to read it.
  struct Held {
    std::vector<Tensor> ranks;  // per tensor-parallel rank
    std::map<int, int> readers; // per pipeline rank of this process: its programs still to read it
  };
  using Key = std::pair<int, std::string>; // (micro-batch, transfer)

  std::map<int, int> localReaders(const std::string &transfer) const {
    return t_.schedule_.localReaders(transfer);
  }
  int rankOf(const parallel::PipelineAction &a) const { return t_.schedule_.rankOf(a); }
  Status holdOn(int rank, const Key &key);
  Status bindTransfers(const parallel::PipelineAction &a, const Graph &graph,
                       std::vector<ops::TensorMap> &inputs, std::vector<Key> &read);
  Status takeOutputs(const parallel::PipelineAction &a, std::vector<ops::TensorMap> &outputs,
                     float &loss);
  Status handOver(const parallel::PipelineAction &a);

  Trainer &t_;
  int r_;
  double scale_;
  int T_;
  std::map<Key, Held> held_;
  std::vector<Tensor> sending_; // until the link's sends finish
};

Status Trainer::PipelineRun::holdOn(int rank, const Key &key) {
  const Held &h = held_.at(key);
  for (int t = 0; t < T_; ++t)
    KILN_RETURN_IF_ERROR(t_.memory_[t_.deviceOf(r_, rank, t)].allocate(
        heldName(key.first, key.second), h.ranks[t].byteSize()));
  return Status::ok();
}

// The transfers `a`'s program reads, into its inputs: the run counts them
// while they live. One a stage of another process sent is received now.
Status Trainer::PipelineRun::bindTransfers(const parallel::PipelineAction &a, const Graph &graph,
                                           std::vector<ops::TensorMap> &inputs,
                                           std::vector<Key> &read) {
  for (const GraphInput &in : graph.inputs()) {
    const std::optional<size_t> transfer = t_.schedule_.transferIndex(in.name);
    if (!transfer)
      continue;
    auto h = held_.find({a.micro, in.name});
    if (h == held_.end() && !t_.link_)
      return Error("pipeline: micro-batch " + std::to_string(a.micro) + "'s '" + in.name +
                   "' was never handed over"); // the schedule runs producers first
    if (h == held_.end()) {
      const parallel::StageTransfer &from = t_.program_.transfers[*transfer];
      Held received{std::vector<Tensor>(T_), localReaders(in.name)};
      for (Tensor &piece : received.ranks) {
        piece = Tensor(graph.type(in.value));
        KILN_RETURN_IF_ERROR(
            t_.link_->receive(piece.data(), piece.byteSize(),
                              t_.processOfStage(t_.program_.parallel.pipelineRank(from.from.stage)),
                              static_cast<int>(*transfer)));
      }
      h = held_.emplace(Key{a.micro, in.name}, std::move(received)).first;
    }
    for (int t = 0; t < T_; ++t) {
      inputs[t][in.name] = h->second.ranks[t];
      t_.memory_[t_.deviceOf(r_, rankOf(a), t)].release(heldName(a.micro, in.name));
    }
    read.push_back(h->first);
  }
  return Status::ok();
}

// The loss, the gradients (summed over the micro-batches) and what the
// program hands the others.
Status Trainer::PipelineRun::takeOutputs(const parallel::PipelineAction &a,
                                         std::vector<ops::TensorMap> &outputs, float &loss) {
  for (int t = 0; t < T_; ++t)
    for (auto &[name, value] : outputs[t]) {
      if (name == "loss") {
        loss += t == 0 ? static_cast<float>(value.getFloat(0)) : 0.0f;
      } else if (auto grad = t_.gradient_of_.find(name); grad != t_.gradient_of_.end()) {
        KILN_RETURN_IF_ERROR(t_.accumulateGradient(t_.deviceOf(r_, rankOf(a), t), grad->second,
                                                   std::move(value), a.micro, false));
      } else {
        Held &h = held_[{a.micro, name}];
        h.ranks.resize(T_);
        h.ranks[t] = std::move(value);
        h.readers = localReaders(name);
      }
    }
  return Status::ok();
}

// What `a` made for other programs: held on this process's reading ranks,
// sent to the others'.
Status Trainer::PipelineRun::handOver(const parallel::PipelineAction &a) {
  for (size_t i = 0; i < t_.program_.transfers.size(); ++i) {
    const parallel::StageTransfer &transfer = t_.program_.transfers[i];
    if (!(transfer.from == parallel::StageProgram{a.stage, a.forward}))
      continue;
    const Key key{a.micro, transfer.name};
    std::set<int> processes; // of the ranks elsewhere that read it
    for (const auto &[rank, uses] : t_.schedule_.readers(transfer.name)) {
      if (t_.holdsStage(rank))
        KILN_RETURN_IF_ERROR(holdOn(rank, key));
      else
        processes.insert(t_.processOfStage(rank));
    }
    for (int process : processes)
      for (const Tensor &piece : held_.at(key).ranks) {
        sending_.push_back(piece);
        KILN_RETURN_IF_ERROR(t_.link_->send(std::as_const(sending_.back()).data(), piece.byteSize(),
                                            process, static_cast<int>(i)));
      }
    if (held_.at(key).readers.empty())
      held_.erase(key);
  }
  return Status::ok();
}

Status Trainer::PipelineRun::action(const parallel::PipelineAction &a, float &loss) {
  const size_t program = StepSchedule::programOf(a);
  const Graph &graph = t_.program_.stages[a.stage].program(a.forward).graph;
  const ops::TensorMap common = t_.microBatchInputs(r_, a.micro, scale_);
  std::vector<ops::TensorMap> inputs(T_);
  std::vector<const ops::TensorMap *> group;
  std::vector<DeviceMemory *> memory;
  std::vector<FloatStatus *> status;
  std::vector<int> ranks;
  for (int t = 0; t < T_; ++t) {
    const int d = t_.deviceOf(r_, rankOf(a), t);
    inputs[t] = t_.weights_[d];
    inputs[t].insert(common.begin(), common.end());
    if (!t_.program_.signature.tensor_parallel_rank.empty())
      inputs[t][t_.program_.signature.tensor_parallel_rank] = Tensor::fromInts(DType::I64, {}, {t});
    group.push_back(&inputs[t]);
    memory.push_back(&t_.memory_[d]);
    status.push_back(&t_.float_status_[d]);
    ranks.push_back(t_.globalDevice(d));
  }
  std::vector<Key> read;
  KILN_RETURN_IF_ERROR(bindTransfers(a, graph, inputs, read));
  if (t_.profiler_)
    t_.stage_executors_[program]->profileInto(
        {t_.profiler_.get(), t_.stage_programs_[program], t_.step_ + 1, ranks});
  auto outputs = t_.stage_executors_[program]->runGroup(group, memory, status);
  if (!outputs) {
    const int first = t_.deviceOf(r_, rankOf(a), 0), last = t_.deviceOf(r_, rankOf(a), T_ - 1);
    return outputs.error().withContext(
        (T_ == 1 ? t_.deviceName(first) : t_.deviceName(first) + ".." + t_.deviceName(last)) +
        ", step " + std::to_string(t_.step_ + 1) + ", micro-batch " + std::to_string(a.micro) +
        "'s " + (a.forward ? "forward" : "backward") +
        (t_.program_.parallel.virtual_stages > 1 ? " of model stage " + std::to_string(a.stage)
                                                 : ""));
  }
  // What it read it no longer holds, unless a later program of the rank
  // (the stage's backward) reads it too.
  for (const Key &key : read) {
    Held &h = held_.at(key);
    if (--h.readers.at(rankOf(a)) > 0)
      KILN_RETURN_IF_ERROR(holdOn(rankOf(a), key));
    else if (h.readers.erase(rankOf(a)), h.readers.empty())
      held_.erase(key);
  }
  KILN_RETURN_IF_ERROR(takeOutputs(a, *outputs, loss));
  return handOver(a);
}

Status Trainer::pipelineForwardBackward(int r, double scale, float &loss) {
  loss = 0;
  PipelineRun run(*this, r, scale);
  const std::vector<parallel::PipelineAction> &order = schedule_.order();
  std::vector<double> seconds; // per action, as run (0: another process's)
  const int64_t t0 = trace_ ? trace_->now() : 0;
  for (const parallel::PipelineAction &a : order) {
    const auto started = Profiler::Clock::now();
    const bool here = schedule_.runsHere(a);
    if (here)
      KILN_RETURN_IF_ERROR(run.action(a, loss));
    seconds.push_back(here ? std::chrono::duration<double>(Profiler::Clock::now() - started).count()
                           : 0.0);
  }
  KILN_RETURN_IF_ERROR(run.finish());
  if (!trace_)
    return Status::ok();
  // Where devices running at once would have run each action, from the
  // time each took here.
  const std::vector<parallel::ActionTime> times = schedule_.placed(seconds);
  for (size_t i = 0; i < order.size(); ++i) {
    const parallel::PipelineAction &a = order[i];
    const int rank = schedule_.rankOf(a);
    const std::string name =
        std::string(a.forward ? "forward " : "backward ") + std::to_string(a.micro) +
        (program_.parallel.virtual_stages > 1 ? " of stage " + std::to_string(a.stage) : "");
    for (int t = 0; t < tp() && holdsStage(rank); ++t)
      trace_->add(deviceOf(r, rank, t), name, t0 + static_cast<int64_t>(times[i].start * 1e6),
                  t0 + static_cast<int64_t>(times[i].end * 1e6), step_ + 1);
  }
  return Status::ok();
}

} // namespace kiln::runtime
