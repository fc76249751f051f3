#include "debug/overflow_fixes.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "ir/layer_scope.h"
#include "runtime/executor.h"

namespace kiln::debug {
namespace {

std::optional<int64_t> layerOf(const std::string &name) {
  const int64_t layer = layerWithin(name);
  return layer < 0 ? std::nullopt : std::optional<int64_t>(layer);
}

// The module an op belongs to: "transformer.h.1.mlp" for
// "transformer.h.1.mlp.mul" and its gradients, else the name up to its last
// component ("lm_head" for "lm_head.matmul").
std::string moduleOf(std::string name) {
  if (name.rfind("grad.", 0) == 0)
    name = name.substr(5);
  if (std::string_view module = layerModuleOf(name); !module.empty())
    return std::string(module);
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(0, dot);
}

} // namespace

Expected<StatusRun> runWithStatus(const Graph &graph, codegen::CompiledKernels kernels,
                                  const ops::TensorMap &inputs) {
  KILN_ASSIGN_OR_RETURN(auto executor, runtime::Executor::create(graph, std::move(kernels)));
  runtime::FloatStatus status;
  StatusRun run;
  KILN_ASSIGN_OR_RETURN(run.outputs, executor->run(inputs, nullptr, &status));
  run.overflowed = status.overflowed();
  return run;
}

namespace {

// 4. The attention's scores and softmax in fp32, for its layer and for all.
void attentionCandidates(const OverflowReport &report, const OverflowJob &job,
                         std::vector<FixCandidate> &out) {
  const std::optional<int64_t> layer = layerOf(report.op_name);
  if (layerModuleOf(report.op_name).ends_with("attn") && layer) {
    FixCandidate c;
    c.description = "AttentionFp32CastPass for layer " + std::to_string(*layer);
    c.enable_passes = {"AttentionFp32CastPass"};
    c.attention_fp32_layers = {*layer};
    for (int64_t l : job.attention_fp32_layers)
      c.attention_fp32_layers.insert(l);
    std::string layers;
    for (int64_t l : c.attention_fp32_layers)
      layers += (layers.empty() ? "" : ",") + std::to_string(l);
    c.flags = "--enable-pass AttentionFp32CastPass --attention-fp32-layers " + layers;
    out.push_back(std::move(c));
    // The same weights often overflow the other layers next.
    FixCandidate every;
    every.description = "AttentionFp32CastPass for every layer";
    every.enable_passes = {"AttentionFp32CastPass"};
    every.every_attention_layer = true;
    every.flags = "--enable-pass AttentionFp32CastPass";
    out.push_back(std::move(every));
    // The fused attention keeps the scores and the softmax in f32 inside one
    // kernel: the fix every 910B recipe uses, where the target has it.
    if (job.flash_attention_available) {
      FixCandidate fused;
      fused.description = "FlashAttentionFusionPass (fused attention, scores in f32 inside it)";
      fused.enable_passes = {"FlashAttentionFusionPass"};
      fused.flags = "--enable-pass FlashAttentionFusionPass";
      out.push_back(std::move(fused));
    }
  }
}

// 5 and 6: bf16 mixed precision, a smaller loss scale.
void numericsCandidates(const OverflowReport &report, const OverflowJob &job,
                        const ops::TensorMap &inputs, std::vector<FixCandidate> &out) {
  // 5. bf16: fp32's range at half the bytes.
  if (job.target_has_bf16 && job.precision_mode != "allow_mix_precision_bf16") {
    FixCandidate c;
    c.description = "bf16 mixed precision";
    c.precision_mode = "allow_mix_precision_bf16";
    c.flags = "--precision-mode allow_mix_precision_bf16";
    out.push_back(std::move(c));
  }

  // 6. A smaller loss scale, when the step scales its loss.
  auto scale = inputs.find("loss_scale");
  if (report.backward && scale != inputs.end() && scale->second.numElements() == 1) {
    const double current = scale->second.getFloat(0);
    for (double factor : {16.0, 256.0, 65536.0}) {
      if (current / factor < 1)
        break;
      FixCandidate c;
      c.loss_scale = current / factor;
      c.description = "a loss scale of " + reportNumber(c.loss_scale);
      c.flags = "--loss-scale fixed:" + reportNumber(c.loss_scale) +
                " (or dynamic loss scaling, which finds it)";
      out.push_back(std::move(c));
    }
  }
}

} // namespace

std::vector<FixCandidate> fixCandidates(const Graph &graph, const OverflowReport &report,
                                        const OverflowJob &job, const ops::TensorMap &inputs,
                                        const std::set<std::string> &names) {
  std::vector<FixCandidate> out;
  if (report.op_name.empty())
    return out;
  const NodeId op = graph.findNode(report.op_name);
  if (op == kNoNode)
    return out;
  const std::string module = moduleOf(report.op_name);

  // keep_dtype lines: nodes the job's keep_dtype can name, in graph order.
  auto keepCandidate = [&](const std::string &description, const std::set<NodeId> &nodes) {
    FixCandidate c;
    c.description = description;
    for (NodeId n : nodes) {
      const Node &node = graph.node(n);
      // A cube that takes no f32 cannot keep a matmul in f32 (E40005).
      const bool cube = node.op == "MatMul" || node.op == "BatchMatMul";
      if (names.count(node.name) && (job.cube_takes_f32 || !cube))
        c.keep_dtype.push_back(node.name);
    }
    for (const FixCandidate &earlier : out)
      if (earlier.keep_dtype == c.keep_dtype)
        return;
    if (!c.keep_dtype.empty())
      out.push_back(std::move(c));
  };
  auto inModule = [&](const std::string &name) {
    return name.rfind(module + ".", 0) == 0 || name.rfind("grad." + module + ".", 0) == 0;
  };

  // 1. The op and its producers within its module.
  std::set<NodeId> producers{op};
  std::vector<NodeId> work{op};
  while (!work.empty()) {
    const NodeId n = work.back();
    work.pop_back();
    for (ValueId v : graph.node(n).inputs) {
      const NodeId p = graph.value(v).producer;
      if (p != kNoNode && inModule(graph.node(p).name) && producers.insert(p).second)
        work.push_back(p);
    }
  }
  keepCandidate("keep " + report.op_name + " and its producers in fp32", producers);

  // 2. Its whole module, forward and backward.
  std::set<NodeId> module_nodes;
  for (size_t n = 0; n < graph.numNodes(); ++n)
    if (inModule(graph.node(static_cast<NodeId>(n)).name))
      module_nodes.insert(static_cast<NodeId>(n));
  keepCandidate("keep every op of " + module + " in fp32", module_nodes);

  // 3. The op and everything computed from it.
  std::set<NodeId> downstream = producers;
  for (size_t n = static_cast<size_t>(op); n < graph.numNodes(); ++n) {
    const Node &node = graph.node(static_cast<NodeId>(n));
    bool reads = static_cast<NodeId>(n) == op;
    for (ValueId v : node.inputs) {
      const NodeId p = graph.value(v).producer;
      reads = reads || (p != kNoNode && downstream.count(p));
    }
    if (reads)
      downstream.insert(static_cast<NodeId>(n));
  }
  keepCandidate("keep " + report.op_name + " and everything computed from it in fp32", downstream);

  attentionCandidates(report, job, out);
  numericsCandidates(report, job, inputs, out);
  return out;
}

void verifyFixes(OverflowReport &report, const ops::TensorMap &reference, const FixTrial &trial,
                 double tolerance) {
  auto ref_loss = reference.find("loss");
  for (FixCandidate &c : report.fixes) {
    c.tried = true;
    c.error = std::numeric_limits<double>::infinity();
    auto run = trial(c);
    if (!run) {
      const std::string &why = run.message();
      c.outcome = "the job does not run: " + why.substr(0, why.find('\n'));
      continue;
    }
    if (run->overflowed) {
      c.outcome = "the step still overflows";
      continue;
    }
    std::string not_finite;
    for (const auto &[name, t] : run->outputs)
      if (not_finite.empty() && isFloat(t.dtype()) && !rangeOf(name, t).finite())
        not_finite = name;
    if (!not_finite.empty()) {
      c.outcome = "'" + not_finite + "' is not finite";
      continue;
    }
    if (ref_loss != reference.end() && run->outputs.count("loss")) {
      const double want = ref_loss->second.getFloat(0);
      const double got = run->outputs.at("loss").getFloat(0);
      c.error = std::abs(got - want) / std::max(std::abs(want), 1e-12);
      c.outcome = "loss " + reportNumber(got) + ", reference " + reportNumber(want);
    } else {
      c.error = 0;
      for (const auto &[name, want] : reference) {
        auto got = run->outputs.find(name);
        if (got == run->outputs.end() || !isFloat(want.dtype()) ||
            got->second.numElements() != want.numElements())
          continue;
        double scale = 1e-12, diff = 0;
        for (int64_t i = 0; i < want.numElements(); ++i) {
          scale = std::max(scale, std::abs(static_cast<double>(want.getFloat(i))));
          diff = std::max(
              diff, std::abs(static_cast<double>(got->second.getFloat(i)) - want.getFloat(i)));
        }
        c.error = std::max(c.error, diff / scale);
      }
      c.outcome = "outputs within " + reportNumber(c.error) + " of the reference";
    }
    c.verified = c.error <= tolerance;
    if (!c.verified)
      c.outcome += ": off by " + reportNumber(c.error) + ", more than " + reportNumber(tolerance);
  }
  std::stable_sort(report.fixes.begin(), report.fixes.end(),
                   [](const FixCandidate &a, const FixCandidate &b) {
                     if (a.verified != b.verified)
                       return a.verified;
                     return a.verified && a.error < b.error;
                   });
}

} // namespace kiln::debug
