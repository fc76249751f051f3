#include "runtime/evaluation.h"

#include <chrono>
#include <cmath>
#include <cstdio>

#include "runtime/executor.h"
#include "runtime/float_status.h"

namespace kiln::runtime {

nlohmann::json EvalRecord::toJson() const {
  auto number = [](double v) -> nlohmann::json {
    return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
  };
  return {{"loss", number(loss)}, {"perplexity", number(perplexity)},
          {"windows", windows},   {"tokens", tokens},
          {"seconds", seconds},   {"tokens_per_s", tokens_per_s},
          {"overflow", overflow}};
}

std::string EvalRecord::toText() const {
  char buf[200];
  std::snprintf(buf, sizeof(buf),
                "loss %.4f  perplexity %.4g  (%lld tokens in %lld windows, %.0f "
                "tokens/s)%s",
                loss, perplexity, static_cast<long long>(tokens), static_cast<long long>(windows),
                tokens_per_s, overflow ? "  overflow: a kernel raised the float status" : "");
  return buf;
}

EvalRecord EvalRecord::of(double sum, int64_t windows, int64_t seq, double seconds, bool overflow) {
  EvalRecord r;
  r.windows = windows;
  r.tokens = windows * seq;
  r.loss = windows > 0 ? sum / static_cast<double>(windows) : 0.0;
  r.perplexity = std::exp(r.loss);
  r.seconds = seconds;
  r.tokens_per_s = seconds > 0 ? static_cast<double>(r.tokens) / seconds : 0.0;
  r.overflow = overflow || !std::isfinite(r.loss);
  return r;
}

Expected<int64_t> evalWindows(const TokenData &data, const std::string &path, int64_t batch,
                              int64_t max_tokens) {
  int64_t windows = data.windows();
  if (max_tokens > 0)
    windows = std::min(windows, max_tokens / data.seq());
  windows -= windows % batch;
  if (windows == 0)
    return Error(path + ": " + std::to_string(data.tokens()) + " tokens hold " +
                 std::to_string(data.windows()) + " windows of " + std::to_string(data.seq()) +
                 " tokens, fewer than one batch of " + std::to_string(batch) +
                 " to evaluate (a longer file, or a smaller batch)");
  return windows;
}

Expected<EvalRecord> evaluate(const parallel::EvalProgram &program, const ops::TensorMap &weights,
                              const std::string &weights_source, const TokenData &data,
                              int64_t windows) {
  if (program.stages.size() != 1)
    return Error("evaluate: a program of " + std::to_string(program.stages.size()) +
                 " pipeline stages; one device runs one");
  const parallel::CompiledGraph &forward = program.stages.front();
  const Graph &graph = forward.graph;
  // The weights in the graph's dtypes, once; the tokens per batch.
  ops::TensorMap inputs;
  for (const GraphInput &in : graph.inputs()) {
    if (!isWeight(in.role))
      continue;
    const TensorType &want = graph.type(in.value);
    auto it = weights.find(in.name);
    if (it == weights.end())
      return Error(weights_source + ": no tensor '" + in.name + "' (the model needs " +
                   typeToString(want) + ")");
    if (it->second.shape() != want.shape)
      return Error(weights_source + ": tensor '" + in.name + "' has shape " +
                   shapeToString(it->second.shape()) + ", the model needs " +
                   shapeToString(want.shape));
    inputs[in.name] = it->second.dtype() == want.dtype ? it->second : it->second.castTo(want.dtype);
  }
  KILN_ASSIGN_OR_RETURN(auto executor, Executor::create(graph, forward.kernels));
  const int64_t batch = program.micro_batch;
  FloatStatus status;
  double sum = 0;
  const auto started = std::chrono::steady_clock::now();
  for (int64_t first = 0; first + batch <= windows; first += batch) {
    const Tensor ids = data.windows(first, batch);
    inputs["input_ids"] = ids;
    inputs["labels"] = ids;
    auto outputs = executor->run(inputs, nullptr, &status);
    if (!outputs)
      return outputs.error().withContext("windows " + std::to_string(first) + " to " +
                                         std::to_string(first + batch - 1));
    // The batch's mean over its windows' predicted tokens: each window's
    // mean, summed, is the batch's mean times its windows.
    sum += outputs->at("loss").getFloat(0) * static_cast<double>(batch);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return EvalRecord::of(sum, windows - windows % batch, data.seq(), seconds, status.get() != 0);
}

} // namespace kiln::runtime
