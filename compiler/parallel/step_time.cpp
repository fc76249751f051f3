#include "compiler/parallel/step_time.h"

#include <algorithm>
#include <array>
#include <cstdio>

#include "compiler/parallel/pipeline_schedule.h"
#include "executable/kernel_cost.h"
#include "passes/memory/recompute_pass.h"

namespace kiln::parallel {

double ringAllReduceSeconds(double bytes, int64_t ranks, const Link &link) {
  if (ranks <= 1)
    return 0;
  const double n = static_cast<double>(ranks);
  return 2 * (n - 1) * (link.latency_seconds + bytes / n / link.bytes_per_second);
}

double ringReduceScatterSeconds(double bytes, int64_t ranks, const Link &link) {
  if (ranks <= 1)
    return 0;
  const double n = static_cast<double>(ranks);
  return (n - 1) * (link.latency_seconds + bytes / n / link.bytes_per_second);
}

double ringAllGatherSeconds(double bytes, int64_t ranks, const Link &link) {
  return ringReduceScatterSeconds(bytes, ranks, link);
}

double StepTime::tokensPerSecondPerDevice() const {
  const double s = seconds();
  return s > 0 && devices > 0 ? static_cast<double>(tokens) / s / devices : 0;
}

std::string formatSeconds(double s) {
  char buf[32];
  if (s >= 1)
    std::snprintf(buf, sizeof(buf), "%.2f s", s);
  else if (s >= 1e-3)
    std::snprintf(buf, sizeof(buf), "%.1f ms", s * 1e3);
  else
    std::snprintf(buf, sizeof(buf), "%.0f us", s * 1e6);
  return buf;
}

std::string StepTime::toText() const {
  char rate[32];
  std::snprintf(rate, sizeof(rate), "%.0f", tokensPerSecondPerDevice());
  return "step " + formatSeconds(seconds()) + " (kernels " + formatSeconds(kernels) + ", update " +
         formatSeconds(update) + ", tensor-parallel " + formatSeconds(tensor_parallel) +
         ", data-parallel " + formatSeconds(data_parallel) +
         (pipeline > 0 ? ", pipeline bubble and sends " + formatSeconds(pipeline) : "") +
         "): " + rate + " tokens/s per device";
}

namespace {

double tensorBytes(const TensorType &type) {
  return static_cast<double>(numElements(type.shape)) * static_cast<double>(dtypeSize(type.dtype));
}

// The rates a kernel runs at, from the target; made once per prediction.
class Roofline {
public:
  static Expected<Roofline> of(const target::Target &target) {
    if (target.hbm_bandwidth_gbps <= 0)
      return Error("target '" + target.name +
                   "' has no hbm_bandwidth_gbps: the cost model needs it");
    return Roofline(target);
  }

  // max(cube time, vector time, memory time) of one kernel.
  Expected<double> seconds(const Graph &graph, const executable::KernelSpec &kernel) const {
    double cube = 0, vector = 0;
    for (NodeId id : kernel.members) {
      const Node &node = graph.node(id);
      const executable::NodeWork work = executable::nodeWork(graph, node);
      if (work.cube > 0) {
        const DType d = graph.type(node.inputs[0]).dtype;
        auto rate = target_.peak_tflops.find(d);
        if (rate == target_.peak_tflops.end())
          return Error("target '" + target_.name + "' gives no cube peak for " +
                       std::string(dtypeName(d)) + " matmuls (peak_tflops." +
                       std::string(dtypeName(d)) + ")");
        cube += work.cube / (rate->second * 1e12);
      }
      if (work.vector > 0) {
        const DType d = node.outputs.empty() ? DType::F32 : graph.type(node.outputs[0]).dtype;
        auto rate = target_.vector_peak_tflops.find(d);
        if (rate == target_.vector_peak_tflops.end())
          rate = target_.vector_peak_tflops.find(DType::F32);
        if (rate == target_.vector_peak_tflops.end())
          return Error("target '" + target_.name +
                       "' gives no vector peak (vector_peak_tflops.f32)");
        vector += work.vector / (rate->second * 1e12);
      }
    }
    const double memory = executable::kernelCost(graph, kernel).bytes() /
                          (static_cast<double>(target_.hbm_bandwidth_gbps) * 1e9);
    return std::max({cube, vector, memory});
  }

private:
  explicit Roofline(const target::Target &target) : target_(target) {}
  const target::Target &target_;
};

// The kernels of `graph` on one device, and its tensor-parallel collectives.
struct GraphTime {
  double kernels = 0, collectives = 0;
  std::map<std::string, double> kinds;
};

// The input-gradient matmuls beside the weight-gradient matmuls that read
// `gather`'s output (through reshapes): those whose output gradient is
// theirs, and that read not the gathered sequence.
std::vector<NodeId> inputGradientMatmuls(const Graph &graph, NodeId gather,
                                         const std::vector<std::vector<NodeId>> &users) {
  std::vector<ValueId> gathered{graph.node(gather).outputs[0]};
  std::vector<NodeId> found;
  for (size_t k = 0; k < gathered.size(); ++k)
    for (NodeId u : users[gathered[k]]) {
      const Node &node = graph.node(u);
      if (node.op == "Reshape") {
        gathered.push_back(node.outputs[0]);
        continue;
      }
      if (node.op != "MatMul")
        continue;
      for (ValueId dy : node.inputs) {
        if (std::find(gathered.begin(), gathered.end(), dy) != gathered.end())
          continue;
        for (NodeId v : users[dy])
          if (v != u && graph.node(v).op == "MatMul" &&
              std::find(found.begin(), found.end(), v) == found.end())
            found.push_back(v);
      }
    }
  return found;
}

Expected<GraphTime> graphTime(const CompiledGraph &compiled, const Roofline &roofline, int64_t tp,
                              const Link &tp_link) {
  GraphTime t;
  const Graph &graph = compiled.graph;
  std::vector<double> kernel_seconds(graph.numNodes(), 0); // of the kernel a node runs in
  for (const executable::CompiledKernel &k : compiled.kernels.kernels) {
    if (k.collective || executable::isReshapeView(graph, k.spec))
      continue; // a view: nothing runs
    KILN_ASSIGN_OR_RETURN(double s, roofline.seconds(graph, k.spec));
    t.kernels += s;
    t.kinds[k.spec.kind] += s;
    for (NodeId id : k.spec.members)
      kernel_seconds[id] = s;
  }
  std::vector<std::vector<NodeId>> users;
  for (const executable::CompiledKernel &k : compiled.kernels.kernels) {
    if (!k.collective)
      continue;
    // TensorParallelCopy hands every rank the value it already has;
    // ZeRO-3's gathers are the data-parallel term's (predictStepTime).
    // Sequence parallelism's all-gather and reduce-scatter move the whole
    // sequence's tensor (the gather's output, the scatter's input) in
    // half an all-reduce's steps.
    const NodeId id = k.spec.members[0];
    const Node &node = graph.node(id);
    if (node.op == "TensorParallelAllGather") {
      double seconds = ringAllGatherSeconds(tensorBytes(graph.type(node.outputs[0])), tp, tp_link);
      // The backward's gather again of a slice (SequenceRegatherPass) runs
      // beside the projection's input-gradient matmul, which needs only
      // the output gradient and the weight, as Megatron overlaps them: it
      // costs what that matmul does not hide.
      if (node.provenance.pass == passes::kSequenceRegatherPassName) {
        if (users.empty())
          users = graph.computeUsers();
        double hidden = 0;
        for (NodeId dx : inputGradientMatmuls(graph, id, users))
          hidden += kernel_seconds[dx];
        seconds = std::max(0.0, seconds - hidden);
      }
      t.collectives += seconds;
    } else if (node.op == "TensorParallelReduceScatter") {
      t.collectives +=
          ringReduceScatterSeconds(tensorBytes(graph.type(node.inputs[0])), tp, tp_link);
    } else if (node.op != "TensorParallelCopy" && node.op != "DataParallelGather") {
      // A reduce in groups (a key/value head replicated over the ranks
      // that share it) runs over each group's ranks.
      const int64_t groups = node.attrs.has("groups") ? node.attrs.getInt("groups") : 1;
      for (ValueId v : node.outputs)
        t.collectives += ringAllReduceSeconds(tensorBytes(graph.type(v)), tp / groups, tp_link);
    }
  }
  return t;
}

// The 1F1B schedule (interleaved with virtual stages) on devices running at
// once: every action its program's kernels and collectives, and the sends
// it ends with over the link between pipeline ranks. The busiest device's
// own work (all its model stages') goes to `kernels` and `tensor_parallel`,
// the rest of the span to `pipeline`.
Status addPipelineTime(StepTime &time, const TrainingProgram &program, const Roofline &roofline,
                       const Link &tp_link, const Link &stage_link) {
  const ParallelConfig &layout = program.parallel;
  const int stages = static_cast<int>(program.stages.size());
  std::vector<std::array<GraphTime, 2>> stage(stages); // forward, backward
  std::vector<std::array<double, 2>> sends(stages, {0.0, 0.0});
  for (int s = 0; s < stages; ++s)
    for (int f = 0; f < 2; ++f) {
      KILN_ASSIGN_OR_RETURN(
          stage[s][f], graphTime(program.stages[s].program(f == 0), roofline, layout.tp, tp_link));
    }
  for (const StageTransfer &t : program.transfers) {
    const Graph &g = program.stages[t.from.stage].program(t.from.forward).graph;
    for (const StageProgram &to : t.to)
      if (layout.pipelineRank(to.stage) != layout.pipelineRank(t.from.stage))
        sends[t.from.stage][t.from.forward ? 0 : 1] +=
            stage_link.latency_seconds +
            tensorBytes(g.type(g.findOutput(t.name)->value)) / stage_link.bytes_per_second;
  }
  const std::vector<PipelineAction> order =
      pipelineSchedule(layout.pp, layout.grad_accum, layout.virtual_stages);
  std::vector<double> seconds;
  for (const PipelineAction &a : order) {
    const int f = a.forward ? 0 : 1;
    seconds.push_back(stage[a.stage][f].kernels + stage[a.stage][f].collectives +
                      sends[a.stage][f]);
  }
  const std::vector<ActionTime> times = simulatePipeline(order, seconds, layout.pp);
  double span = 0;
  for (const ActionTime &t : times)
    span = std::max(span, t.end);
  std::vector<double> work(layout.pp, 0.0);
  for (int s = 0; s < stages; ++s)
    work[layout.pipelineRank(s)] += stage[s][0].kernels + stage[s][1].kernels +
                                    stage[s][0].collectives + stage[s][1].collectives;
  const int busiest = static_cast<int>(std::max_element(work.begin(), work.end()) - work.begin());
  for (int s = 0; s < stages; ++s) {
    if (layout.pipelineRank(s) != busiest)
      continue;
    for (const GraphTime &g : stage[s]) {
      time.kernels += g.kernels * layout.grad_accum;
      time.tensor_parallel += g.collectives * layout.grad_accum;
      for (const auto &[kind, spent] : g.kinds)
        time.kernel_kinds[kind] += spent * layout.grad_accum;
    }
  }
  time.pipeline = std::max(0.0, span - time.kernels - time.tensor_parallel);
  return Status::ok();
}

} // namespace

int nodesFor(const target::Target &target, int devices) {
  const int64_t per_node = target.interconnect.devices_per_node;
  return per_node > 0 ? static_cast<int>((devices + per_node - 1) / per_node) : 1;
}

Expected<StepTime> predictStepTime(const TrainingProgram &program, const target::Target &target,
                                   int nodes) {
  const ParallelConfig &layout = program.parallel;
  const target::Interconnect &net = target.interconnect;
  if (net.devices_per_node <= 0 && layout.devices > 1)
    return Error("target '" + target.name + "' has no interconnect: the cost model needs it");
  KILN_ASSIGN_OR_RETURN(Roofline roofline, Roofline::of(target));
  const int64_t per_node = std::max<int64_t>(1, layout.devices / std::max(1, nodes));
  // A group of `ranks` devices `stride` apart from device 0 runs at the
  // intra-node link unless it reaches past the first node.
  auto linkOf = [&](int64_t ranks, int64_t stride) {
    const bool crosses = (ranks - 1) * stride >= per_node;
    return crosses ? Link{net.inter_node_gbps * 1e9, net.inter_node_latency_us * 1e-6}
                   : Link{net.intra_node_gbps * 1e9, net.intra_node_latency_us * 1e-6};
  };

  StepTime time;
  time.devices = layout.devices;
  time.tokens = program.batch_per_replica * layout.dp * program.seq;
  const Link tp_link = linkOf(layout.tp, 1);
  if (program.stages.empty()) {
    KILN_ASSIGN_OR_RETURN(GraphTime step, graphTime(program.step, roofline, layout.tp, tp_link));
    time.kernels = step.kernels * layout.grad_accum;
    for (const auto &[kind, s] : step.kinds)
      time.kernel_kinds[kind] = s * layout.grad_accum;
    time.tensor_parallel = step.collectives * layout.grad_accum;
  } else {
    KILN_RETURN_IF_ERROR(addPipelineTime(time, program, roofline, tp_link,
                                         linkOf(2, static_cast<int64_t>(layout.tp) * layout.dp)));
  }
  std::map<int, double> update; // per stage: its devices run its buckets
  for (size_t b = 0; b < program.optimizers.size(); ++b) {
    KILN_ASSIGN_OR_RETURN(GraphTime t, graphTime(program.optimizers[b], roofline, 1, {}));
    update[program.bucket_stage[b]] += t.kernels;
  }
  for (const auto &[stage, seconds] : update)
    time.update = std::max(time.update, seconds);

  // The gradients leave the step in the parameters' dtype; under ZeRO the
  // new weight slices go back to every replica.
  // Each stage's replicas reduce its own parameters, the stages at once.
  std::map<int, double> stage_bytes;
  for (const Parameter &p : program.params)
    stage_bytes[p.stage] += tensorBytes(p.type);
  double param_bytes = 0;
  for (const auto &[stage, bytes] : stage_bytes)
    param_bytes = std::max(param_bytes, bytes);
  const Link dp_link = linkOf(layout.dp, layout.tp);
  time.data_parallel = layout.zero >= 2 ? ringReduceScatterSeconds(param_bytes, layout.dp, dp_link)
                                        : ringAllReduceSeconds(param_bytes, layout.dp, dp_link);
  // ZeRO-1 and -2: the new weight slices to every replica; ZeRO-3: each
  // weight gathered for the forward and again for the backward of every
  // micro-batch.
  if (layout.zero == 3)
    time.data_parallel +=
        2.0 * layout.grad_accum * ringAllGatherSeconds(param_bytes, layout.dp, dp_link);
  else if (layout.zero >= 1)
    time.data_parallel += ringAllGatherSeconds(param_bytes, layout.dp, dp_link);
  // The float status and the gradient norm: two scalars over every device.
  time.data_parallel += 2 * ringAllReduceSeconds(8, layout.devices, linkOf(layout.devices, 1));
  return time;
}

} // namespace kiln::parallel
