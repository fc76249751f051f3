#include "compiler/driver/layout_plan_report.h"

#include <cstdio>

#include "support/byte_size.h"

namespace kiln::driver {
namespace {

using nlohmann::json;

// A size as --device-memory takes it: "32GiB", "512MiB", "600KiB", or bytes.
std::string sizeFlag(int64_t bytes) {
  constexpr int64_t kKiB = int64_t{1} << 10, kMiB = int64_t{1} << 20, kGiB = int64_t{1} << 30;
  if (bytes % kGiB == 0)
    return std::to_string(bytes / kGiB) + "GiB";
  if (bytes % kMiB == 0)
    return std::to_string(bytes / kMiB) + "MiB";
  if (bytes % kKiB == 0)
    return std::to_string(bytes / kKiB) + "KiB";
  return std::to_string(bytes);
}

// " v2" (interleaved), " [9/11/11/9]" (the layers of each stage), or "".
std::string pipelineShape(const LayoutCandidate &c) {
  std::string out;
  if (c.layout.virtual_stages > 1)
    out += " v" + std::to_string(c.layout.virtual_stages);
  for (size_t i = 0; i < c.layout.stage_layers.size(); ++i)
    out += (i == 0 ? " [" : "/") + std::to_string(c.layout.stage_layers[i]) +
           (i + 1 == c.layout.stage_layers.size() ? "]" : "");
  return out;
}

std::string layoutName(const LayoutCandidate &c) {
  return "dp" + std::to_string(c.layout.dp) + " x tp" + std::to_string(c.layout.tp) +
         (c.layout.sequenceParallel() ? " sp" : "") +
         (c.layout.pp > 1 ? " x pp" + std::to_string(c.layout.pp) : "") + pipelineShape(c) +
         ", zero " + std::to_string(c.layout.zero) + ", recompute " +
         std::string(passes::recomputeModeName(c.recompute)) + ", " +
         std::to_string(c.micro_batch) + " x " + std::to_string(c.layout.grad_accum);
}

std::string row(const LayoutCandidate &c, size_t rank) {
  char buf[256];
  if (c.time)
    std::snprintf(buf, sizeof(buf), "  %2zu  %-52s %10s  %10s  %8.0f\n", rank,
                  layoutName(c).c_str(), formatBytes(c.peak).c_str(),
                  parallel::formatSeconds(c.time->seconds()).c_str(),
                  c.time->tokensPerSecondPerDevice());
  else
    std::snprintf(buf, sizeof(buf), "  %2zu  %-52s %10s  %10s  %8s\n", rank, layoutName(c).c_str(),
                  formatBytes(c.peak).c_str(), "-", "-");
  return buf;
}

json candidateJson(const LayoutCandidate &c) {
  json j = {{"dp", c.layout.dp},
            {"tp", c.layout.tp},
            {"sequence_parallel", c.layout.sequenceParallel()},
            {"pp", c.layout.pp},
            {"virtual_stages", c.layout.virtual_stages},
            {"pp_layers", c.layout.stage_layers},
            {"zero", c.layout.zero},
            {"recompute", passes::recomputeModeName(c.recompute)},
            {"micro_batches", c.layout.grad_accum},
            {"micro_batch_size", c.micro_batch},
            {"grad_accum", c.layout.grad_accum},
            {"peak_bytes", c.peak},
            {"fits", c.fits},
            {"step_time_s", nullptr},
            {"tokens_per_s_per_device", nullptr},
            {"reason", c.reason},
            {"flags", c.trainFlags()}};
  // What one device holds at the peak, by part: kiln report draws it.
  json parts = json::array();
  for (const auto &[name, bytes] : c.breakdown.parts())
    parts.push_back({{"name", name}, {"bytes", bytes}});
  j["memory"] = {{"at", c.breakdown.update ? "update" : "step"}, {"parts", std::move(parts)}};
  if (c.time) {
    j["step_time_s"] = c.time->seconds();
    j["tokens_per_s_per_device"] = c.time->tokensPerSecondPerDevice();
  }
  return j;
}

} // namespace

std::string trainCommand(const PlanRequest &request, const ResolvedJob &job,
                         const LayoutCandidate &candidate) {
  const std::string memory = !request.device_memory_written.empty() ? request.device_memory_written
                             : request.device_memory > 0 ? sizeFlag(request.device_memory)
                                                         : sizeFlag(job.target.memory.hbm_bytes);
  std::string cmd =
      "kiln train " + request.model.model + " " + std::string(kTokensPlaceholder) + " " +
      std::string(kStepsPlaceholder) + " --devices " + std::to_string(candidate.layout.devices) +
      " --batch " + std::to_string(request.model.batch) + " --seq " +
      std::to_string(request.model.seq) + " --dtype " + std::string(dtypeName(job.dtype)) +
      " --target " + job.target.name + " --device-memory " + memory + " " + candidate.trainFlags();
  if (request.model.lora.enabled())
    cmd += " --lora-rank " + std::to_string(request.model.lora.rank);
  // The passes the plan was made with (FlashAttentionFusionPass changes the
  // peak more than any layout does).
  for (const std::string &pass : job.spec.flags.enable_passes)
    cmd += " --enable-pass " + pass;
  for (const std::string &pass : job.spec.flags.disable_passes)
    cmd += " --disable-pass " + pass;
  return cmd;
}

std::string layoutPlanToText(const PlanRequest &request, const ResolvedJob &job,
                             const LayoutPlan &plan, int shown) {
  size_t fitting = 0;
  for (const LayoutCandidate &c : plan.candidates)
    fitting += c.fits;
  std::string out =
      "kiln plan: " + std::to_string(request.devices) + " x " + job.target.name + " (" +
      formatBytes(plan.device_memory) + " each, " + std::to_string(plan.nodes) + " node" +
      (plan.nodes == 1 ? "" : "s") + "), global batch " + std::to_string(request.model.batch) +
      ", seq " + std::to_string(request.model.seq) + ", " + std::string(dtypeName(job.dtype)) +
      (request.model.lora.enabled() ? ", LoRA " + request.model.lora.toString() : "") + "\n";
  char buf[160];
  std::snprintf(buf, sizeof(buf),
                "  %zu layouts planned in %.1f s, %zu fit (each the plan kiln train "
                "--compile-only makes)\n",
                plan.candidates.size(), plan.seconds, fitting);
  out += buf;
  out += "\n   #  layout (dp x tp x pp, ZeRO, recompute, micro-batch x count) peak per device"
         "       step  tokens/s/device\n";
  size_t listed = 0;
  for (size_t i = 0;
       i < plan.candidates.size() && plan.candidates[i].fits && listed < size_t(shown);
       ++i, ++listed)
    out += row(plan.candidates[i], i + 1);
  if (fitting == 0)
    out += "   (none fits)\n";
  if (fitting < plan.candidates.size()) {
    out += "\n  the nearest that do not fit:\n";
    for (size_t i = fitting; i < plan.candidates.size() && i < fitting + size_t(shown); ++i)
      out += "    " + layoutName(plan.candidates[i]) + ": " + plan.candidates[i].reason + "\n";
  }
  if (!plan.no_time.empty())
    out += "\n  no step times: " + plan.no_time + "\n";
  else if (!job.target.unconfirmed.empty()) {
    std::string figures;
    for (const std::string &u : job.target.unconfirmed)
      figures += (figures.empty() ? "" : ", ") + u;
    out += "\n  step times are a roofline of the target's figures, some unconfirmed (" + figures +
           "); docs/training.md says how far they are from measured runs\n";
  }
  if (const LayoutCandidate *best = plan.recommended()) {
    out += "\n  run the best (fill in TOKENS, your token file, and N, the steps to train):\n    " +
           trainCommand(request, job, *best) + "\n";
  } else {
    out += "\n  nothing fits " + std::to_string(request.devices) + " x " +
           formatBytes(plan.device_memory) + "; what would:\n";
    for (const std::string &w : plan.would_fit)
      out += "    " + w + "\n";
    if (plan.would_fit.empty())
      out += "    nothing kiln plan tried (8x the devices, LoRA, sequences down to 256)\n";
  }
  return out;
}

json layoutPlanToJson(const PlanRequest &request, const ResolvedJob &job, const LayoutPlan &plan) {
  json candidates = json::array();
  for (const LayoutCandidate &c : plan.candidates)
    candidates.push_back(candidateJson(c));
  const LayoutCandidate *best = plan.recommended();
  return {{"recommended", best ? candidateJson(*best) : json(nullptr)},
          {"command", best ? json(trainCommand(request, job, *best)) : json(nullptr)},
          {"candidates", candidates},
          {"would_fit", plan.would_fit},
          {"devices", request.devices},
          {"nodes", plan.nodes},
          {"device_memory", plan.device_memory},
          {"target", job.target.name},
          {"no_step_times", plan.no_time},
          {"unconfirmed", job.target.unconfirmed},
          {"seconds", plan.seconds}};
}

} // namespace kiln::driver
