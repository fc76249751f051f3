// The trainer's validation: the layout's forward alone (program.eval) over
// the held-out windows, between steps. Each global batch of windows splits
// over the replicas as a step's batch does, each replica's share in
// micro-batches through its stages in order (a forward needs no schedule),
// its ranks in lockstep; the losses are summed over the replicas as the
// step's are. It reads the weights where they are and writes nothing a step
// reads: no gradient, moment or loss scale, and its kernels raise a float
// status of their own, so a run trains the same bits with validation as
// without, and every layout validates the same windows.
#include <chrono>
#include <set>

#include "runtime/trainer.h"

namespace kiln::runtime {
namespace {

// What device memory calls a transfer held between two stages' forwards.
std::string heldName(const std::string &transfer) { return "eval:" + transfer; }

} // namespace

Status Trainer::createEvalExecutors(const ExecutorOptions &options) {
  if (!options_.eval_data)
    return Status::ok();
  if (program_.eval.empty())
    return Error("validation: the program was compiled without its forward for evaluation");
  // Every layout validates the same windows: whole global batches.
  KILN_ASSIGN_OR_RETURN(eval_windows_,
                        evalWindows(*options_.eval_data, options_.eval_path,
                                    program_.batch_per_replica * program_.parallel.dp,
                                    options_.eval_tokens));
  for (const parallel::CompiledGraph &g : program_.eval.stages) {
    KILN_ASSIGN_OR_RETURN(auto ex, Executor::create(g.graph, g.kernels, options));
    eval_executors_.push_back(std::move(ex));
  }
  for (size_t i = 0; i < program_.eval.transfers.size(); ++i)
    eval_transfer_of_[program_.eval.transfers[i].name] = i;
  return Status::ok();
}

Status Trainer::evalMicroBatch(int r, int64_t first, std::vector<FloatStatus> &status,
                               float &loss) {
  const int T = tp();
  const parallel::EvalProgram &eval = program_.eval;
  const Tensor ids = options_.eval_data->windows(first, eval.micro_batch);
  // The transfers of this micro-batch, per tensor-parallel rank, by name.
  std::map<std::string, std::vector<Tensor>> held;
  // Tags after the step's own: a message of either is never taken for the other's.
  auto tag = [&](size_t transfer) {
    return static_cast<int>(program_.transfers.size() + transfer);
  };
  // The model stages in order, those of this process's pipeline ranks.
  for (int m = 0; m < static_cast<int>(eval.stages.size()); ++m) {
    const int s = program_.parallel.pipelineRank(m);
    if (!holdsStage(s))
      continue;
    const Graph &graph = eval.stages[m].graph;
    std::vector<ops::TensorMap> inputs(T);
    std::vector<const ops::TensorMap *> group;
    std::vector<DeviceMemory *> memory;
    std::vector<FloatStatus *> statuses;
    for (int t = 0; t < T; ++t) {
      const int d = deviceOf(r, s, t);
      inputs[t] = weights_[d];
      inputs[t]["input_ids"] = ids;
      inputs[t]["labels"] = ids;
      if (!program_.signature.tensor_parallel_rank.empty())
        inputs[t][program_.signature.tensor_parallel_rank] = Tensor::fromInts(DType::I64, {}, {t});
      group.push_back(&inputs[t]);
      memory.push_back(&memory_[d]);
      statuses.push_back(&status[d]);
    }
    for (const GraphInput &in : graph.inputs()) {
      auto transfer = eval_transfer_of_.find(in.name);
      if (transfer == eval_transfer_of_.end())
        continue;
      auto h = held.find(in.name);
      if (h != held.end()) {
        for (int t = 0; t < T; ++t)
          memory_[deviceOf(r, s, t)].release(heldName(in.name));
      } else if (link_) { // sent by a stage of another process
        const int from =
            program_.parallel.pipelineRank(eval.transfers[transfer->second].from.stage);
        std::vector<Tensor> pieces(T);
        for (Tensor &piece : pieces) {
          piece = Tensor(graph.type(in.value));
          KILN_RETURN_IF_ERROR(link_->receive(piece.data(), piece.byteSize(), processOfStage(from),
                                              tag(transfer->second)));
        }
        h = held.emplace(in.name, std::move(pieces)).first;
      } else {
        return Error("validation: '" + in.name + "' was never handed over");
      }
      for (int t = 0; t < T; ++t)
        inputs[t][in.name] = h->second[t];
    }
    auto outputs = eval_executors_[m]->runGroup(group, memory, statuses);
    if (!outputs) {
      const int a = deviceOf(r, s, 0), b = deviceOf(r, s, T - 1);
      return outputs.error().withContext(
          (T == 1 ? deviceName(a) : deviceName(a) + ".." + deviceName(b)) +
          ", validation after step " + std::to_string(step_));
    }
    for (int t = 0; t < T; ++t)
      for (auto &[name, value] : (*outputs)[t]) {
        if (name == "loss") {
          loss += t == 0 ? static_cast<float>(value.getFloat(0)) : 0.0f;
          continue;
        }
        std::vector<Tensor> &pieces = held[name];
        pieces.resize(T);
        pieces[t] = std::move(value);
      }
    // What this stage hands the later ones: held on this process's, sent to the others'.
    for (size_t i = 0; i < eval.transfers.size(); ++i) {
      const parallel::StageTransfer &transfer = eval.transfers[i];
      if (transfer.from.stage != m)
        continue;
      std::set<int> ranks; // each reading rank holds it once, or is sent it once
      for (const parallel::StageProgram &to : transfer.to)
        ranks.insert(program_.parallel.pipelineRank(to.stage));
      std::set<int> processes; // of the reading ranks elsewhere
      for (int rank : ranks) {
        if (!holdsStage(rank)) {
          processes.insert(processOfStage(rank));
          continue;
        }
        for (int t = 0; t < T; ++t)
          KILN_RETURN_IF_ERROR(memory_[deviceOf(r, rank, t)].allocate(
              heldName(transfer.name), held.at(transfer.name)[t].byteSize()));
      }
      for (int process : processes)
        for (const Tensor &piece : held.at(transfer.name))
          KILN_RETURN_IF_ERROR(
              link_->send(std::as_const(piece).data(), piece.byteSize(), process, tag(i)));
    }
  }
  return link_ ? link_->finishSends() : Status::ok();
}

Expected<EvalRecord> Trainer::validate() {
  const auto started = std::chrono::steady_clock::now();
  const int64_t t0 = trace_ ? trace_->now() : 0;
  const int replicas = comm_->localSize();
  const int64_t per_replica = program_.batch_per_replica, micro = program_.eval.micro_batch;
  const int64_t round = per_replica * program_.parallel.dp; // the global batch
  std::vector<FloatStatus> status(memory_.size());
  double sum = 0; // of the windows' losses
  for (int64_t first = 0; first < eval_windows_; first += round) {
    // Per local replica: its micro-batches' mean losses summed, and its float status.
    std::vector<float> sums(2 * static_cast<size_t>(replicas), 0.0f);
    for (int r = 0; r < replicas; ++r) {
      const int replica = replicaOf(deviceOf(r, layout_.firstStage(), 0));
      for (int64_t k = 0; k < per_replica / micro; ++k)
        KILN_RETURN_IF_ERROR(
            evalMicroBatch(r, first + replica * per_replica + k * micro, status, sums[2 * r]));
      for (int s = layout_.firstStage(); s < layout_.firstStage() + layout_.localStages(); ++s)
        for (int t = 0; t < tp(); ++t)
          if (status[deviceOf(r, s, t)].overflowed())
            sums[2 * r + 1] = 1.0f;
    }
    if (link_) { // the last stage's loss, any stage's status
      std::vector<double> mine = {sums[0], sums[1]};
      KILN_RETURN_IF_ERROR(link_->sum(mine));
      sums[0] = static_cast<float>(mine[0]);
      sums[1] = mine[1] > 0 ? 1.0f : 0.0f;
    }
    std::vector<float *> buffers;
    for (int r = 0; r < replicas; ++r)
      buffers.push_back(&sums[2 * r]);
    KILN_RETURN_IF_ERROR(comm_->allReduceSum(buffers, 2));
    sum += static_cast<double>(sums[0]) * static_cast<double>(micro);
    if (sums[1] > 0)
      for (FloatStatus &s : status)
        s.raise(1); // the job's verdict, on every process
  }
  const auto finished = std::chrono::steady_clock::now();
  bool overflow = false;
  for (const FloatStatus &s : status)
    overflow = overflow || s.overflowed();
  if (trace_)
    for (int d = 0; d < static_cast<int>(memory_.size()); ++d)
      trace_->add(d, "validation", t0, trace_->now(), step_);
  return EvalRecord::of(sum, eval_windows_, program_.eval.seq,
                        std::chrono::duration<double>(finished - started).count(), overflow);
}

} // namespace kiln::runtime
