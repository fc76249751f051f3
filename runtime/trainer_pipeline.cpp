// The trainer's pipeline: a replica's micro-batches through its stages in
// the 1F1B schedule's one global order (compiler/parallel/pipeline_schedule.h),
// which the memory plan walks too. What a program hands another (an
// activation down the pipeline, a gradient up it, a stash for the stage's
// own backward) is held on the receiving stage's devices, named
// "mb<k>:<transfer>", from the program that gives it to the last one that
// reads it; in the process it is handed over without a copy, to a stage in
// another process (StageLink) it is sent when made and received when first
// read. The trace shows each device's actions where devices running at once
// would run them.
#include <set>
#include <utility>

#include "compiler/parallel/pipeline_schedule.h"
#include "runtime/trainer.h"

namespace kiln::runtime {
namespace {

std::string heldName(int micro, const std::string &transfer) {
  return "mb" + std::to_string(micro) + ":" + transfer;
}

// A transfer of one micro-batch while some program still has to read it.
struct Held {
  std::vector<Tensor> ranks;  // per tensor-parallel rank
  std::map<int, int> readers; // per stage: its programs still to read it
};

} // namespace

Status Trainer::pipelineForwardBackward(int r, double scale, float &loss) {
  const int T = tp();
  loss = 0;
  std::map<std::pair<int, std::string>, Held> held; // by (micro-batch, transfer)
  std::vector<Tensor> sending;                      // until the link's sends finish
  // The programs of this process's stages that read a transfer.
  auto localReaders = [&](const std::string &name) {
    std::map<int, int> readers;
    for (const auto &[stage, uses] : transfer_uses_.at(name))
      if (holdsStage(stage))
        readers[stage] = uses;
    return readers;
  };
  auto holdOn = [&](int stage, int micro, const std::string &name, const Held &h) -> Status {
    for (int t = 0; t < T; ++t)
      KILN_RETURN_IF_ERROR(
          memory_[deviceOf(r, stage, t)].allocate(heldName(micro, name), h.ranks[t].byteSize()));
    return Status::ok();
  };
  const std::vector<parallel::PipelineAction> order =
      parallel::pipelineSchedule(pp(), program_.parallel.grad_accum);
  std::vector<double> seconds; // per action, as run
  const int64_t t0 = trace_ ? trace_->now() : 0;
  for (const parallel::PipelineAction &a : order) {
    if (!holdsStage(a.stage)) {
      seconds.push_back(0); // another process's
      continue;
    }
    const auto started = Profiler::Clock::now();
    const size_t program = 2 * static_cast<size_t>(a.stage) + (a.forward ? 0 : 1);
    const Graph &graph = program_.stages[a.stage].program(a.forward).graph;
    const ops::TensorMap common = microBatchInputs(r, a.micro, scale);
    std::vector<ops::TensorMap> inputs(T);
    std::vector<const ops::TensorMap *> group;
    std::vector<DeviceMemory *> memory;
    std::vector<FloatStatus *> status;
    std::vector<int> ranks;
    for (int t = 0; t < T; ++t) {
      const int d = deviceOf(r, a.stage, t);
      inputs[t] = weights_[d];
      inputs[t].insert(common.begin(), common.end());
      if (!program_.signature.tensor_parallel_rank.empty())
        inputs[t][program_.signature.tensor_parallel_rank] = Tensor::fromInts(DType::I64, {}, {t});
      group.push_back(&inputs[t]);
      memory.push_back(&memory_[d]);
      status.push_back(&float_status_[d]);
      ranks.push_back(globalDevice(d));
    }
    // What it reads of other programs: the run counts it while it lives.
    // A stage of another process sent it.
    std::vector<std::pair<int, std::string>> read;
    for (const GraphInput &in : graph.inputs()) {
      auto transfer = transfer_of_.find(in.name);
      if (transfer == transfer_of_.end())
        continue;
      auto h = held.find({a.micro, in.name});
      if (h == held.end() && !link_)
        return Error("pipeline: micro-batch " + std::to_string(a.micro) + "'s '" + in.name +
                     "' was never handed over"); // the schedule runs producers first
      if (h == held.end()) {
        const parallel::StageTransfer &t = program_.transfers[transfer->second];
        Held received{std::vector<Tensor>(T), localReaders(in.name)};
        for (Tensor &piece : received.ranks) {
          piece = Tensor(graph.type(in.value));
          KILN_RETURN_IF_ERROR(link_->receive(piece.data(), piece.byteSize(),
                                              processOfStage(t.from.stage),
                                              static_cast<int>(transfer->second)));
        }
        h = held.emplace(std::make_pair(a.micro, in.name), std::move(received)).first;
      }
      for (int t = 0; t < T; ++t) {
        inputs[t][in.name] = h->second.ranks[t];
        memory_[deviceOf(r, a.stage, t)].release(heldName(a.micro, in.name));
      }
      read.push_back(h->first);
    }
    if (profiler_)
      stage_executors_[program]->profileInto(
          {profiler_.get(), stage_programs_[program], step_ + 1, ranks});
    auto outputs = stage_executors_[program]->runGroup(group, memory, status);
    if (!outputs)
      return outputs.error().withContext((T == 1 ? deviceName(deviceOf(r, a.stage, 0))
                                                 : deviceName(deviceOf(r, a.stage, 0)) + ".." +
                                                       deviceName(deviceOf(r, a.stage, T - 1))) +
                                         ", step " + std::to_string(step_ + 1) + ", micro-batch " +
                                         std::to_string(a.micro) + "'s " +
                                         (a.forward ? "forward" : "backward"));
    for (const auto &key : read) {
      Held &h = held.at(key);
      if (--h.readers.at(a.stage) > 0)
        KILN_RETURN_IF_ERROR(holdOn(a.stage, key.first, key.second, h)); // its backward reads it
      else if (h.readers.erase(a.stage), h.readers.empty())
        held.erase(key);
    }
    for (int t = 0; t < T; ++t)
      for (auto &[name, value] : (*outputs)[t]) {
        if (name == "loss") {
          loss += t == 0 ? static_cast<float>(value.getFloat(0)) : 0.0f;
        } else if (auto grad = gradient_of_.find(name); grad != gradient_of_.end()) {
          KILN_RETURN_IF_ERROR(accumulateGradient(deviceOf(r, a.stage, t), grad->second,
                                                  std::move(value), a.micro, false));
        } else {
          Held &h = held[{a.micro, name}];
          h.ranks.resize(T);
          h.ranks[t] = std::move(value);
          h.readers = localReaders(name);
        }
      }
    for (size_t i = 0; i < program_.transfers.size(); ++i) {
      const parallel::StageTransfer &t = program_.transfers[i];
      if (!(t.from == parallel::StageProgram{a.stage, a.forward}))
        continue;
      const auto key = std::make_pair(a.micro, t.name);
      std::set<int> processes; // of the stages elsewhere that read it
      for (const auto &[stage, uses] : transfer_uses_.at(t.name)) {
        if (holdsStage(stage))
          KILN_RETURN_IF_ERROR(holdOn(stage, a.micro, t.name, held.at(key)));
        else
          processes.insert(processOfStage(stage));
      }
      for (int process : processes)
        for (const Tensor &piece : held.at(key).ranks) {
          sending.push_back(piece);
          KILN_RETURN_IF_ERROR(link_->send(std::as_const(sending.back()).data(), piece.byteSize(),
                                           process, static_cast<int>(i)));
        }
      if (held.at(key).readers.empty())
        held.erase(key);
    }
    seconds.push_back(std::chrono::duration<double>(Profiler::Clock::now() - started).count());
  }
  if (link_)
    KILN_RETURN_IF_ERROR(link_->finishSends());
  if (trace_) {
    // Where devices running at once would have run each action, from the
    // time each took here.
    const std::vector<parallel::ActionTime> times = parallel::simulatePipeline(order, seconds);
    for (size_t i = 0; i < order.size(); ++i) {
      const parallel::PipelineAction &a = order[i];
      const std::string name =
          std::string(a.forward ? "forward " : "backward ") + std::to_string(a.micro);
      for (int t = 0; t < T && holdsStage(a.stage); ++t)
        trace_->add(deviceOf(r, a.stage, t), name, t0 + static_cast<int64_t>(times[i].start * 1e6),
                    t0 + static_cast<int64_t>(times[i].end * 1e6), step_ + 1);
    }
  }
  return Status::ok();
}

} // namespace kiln::runtime
