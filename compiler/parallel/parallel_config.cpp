#include "compiler/parallel/parallel_config.h"

#include <algorithm>
#include <charconv>
#include <numeric>

#include "compiler/parallel/pipeline_partition.h"

namespace kiln::parallel {
namespace {

std::string joined(const std::vector<int> &counts, const char *separator) {
  std::string out;
  for (int n : counts)
    out += (out.empty() ? "" : separator) + std::to_string(n);
  return out;
}

} // namespace

std::string ParallelConfig::toString() const {
  return std::to_string(devices) + " device" + (devices == 1 ? "" : "s") + ": dp " +
         std::to_string(dp) + " x tp " + std::to_string(tp) + ", zero " + std::to_string(zero) +
         (sequenceParallel() ? ", sequence parallel" : "") +
         (pp > 1 ? ", pp " + std::to_string(pp) : "") +
         (virtual_stages > 1 ? ", virtual stages " + std::to_string(virtual_stages) : "") +
         (stage_layers.empty() ? "" : ", layers " + joined(stage_layers, "/")) +
         (grad_accum > 1 ? ", grad-accum " + std::to_string(grad_accum) : "");
}

Expected<ParallelConfig> resolveParallelConfig(int devices, int dp, int tp, int zero,
                                               int64_t global_batch, int grad_accum, int pp) {
  ParallelConfig c;
  if (devices < 1)
    return Error("--devices must be at least 1, got " + std::to_string(devices));
  const std::string limit = " (kiln plans at most " + std::to_string(kMaxDevices) + " devices)";
  if (devices > kMaxDevices)
    return Error("--devices " + std::to_string(devices) + " is too many" + limit);
  if (dp < 0 || dp > kMaxDevices || tp < 0 || tp > kMaxDevices)
    return Error("--dp " + std::to_string(dp) + " / --tp " + std::to_string(tp) +
                 ": each must be from 1 to " + std::to_string(kMaxDevices) + limit);
  if (pp < 1 || pp > kMaxDevices)
    return Error("--pp " + std::to_string(pp) + ": expected 1 to " + std::to_string(kMaxDevices));
  c.devices = devices;
  c.tp = tp == 0 ? 1 : tp;
  c.pp = pp;
  if (c.tp < 1 || devices % c.tp != 0)
    return Error("--tp " + std::to_string(c.tp) + " does not divide --devices " +
                 std::to_string(devices));
  if (devices % (int64_t{c.tp} * pp) != 0)
    return Error("--tp " + std::to_string(c.tp) + " x --pp " + std::to_string(pp) +
                 " does not divide --devices " + std::to_string(devices));
  c.dp = dp == 0 ? devices / (c.tp * pp) : dp;
  const int64_t product = static_cast<int64_t>(c.dp) * c.tp * pp;
  if (product != devices)
    return Error("--dp " + std::to_string(c.dp) + " x --tp " + std::to_string(c.tp) +
                 (pp > 1 ? " x --pp " + std::to_string(pp) : "") + " is " +
                 std::to_string(product) + " devices, --devices says " + std::to_string(devices) +
                 ": they must agree");
  if (zero < 0 || zero > 3)
    return Error("--zero " + std::to_string(zero) + ": expected 0, 1, 2 or 3");
  if (zero == 3 && pp > 1)
    return Error("--zero 3 with --pp " + std::to_string(pp) +
                 ": ZeRO-3 inside pipeline stages is not built; use --zero 2 with --pp, or "
                 "--zero 3 without it");
  c.zero = zero;
  if (grad_accum < 1 || grad_accum > kMaxGradAccum)
    return Error("--grad-accum " + std::to_string(grad_accum) + ": expected 1 to " +
                 std::to_string(kMaxGradAccum));
  c.grad_accum = grad_accum;
  if (global_batch % c.dp != 0)
    return Error("--batch " + std::to_string(global_batch) + " does not split over " +
                 std::to_string(c.dp) + " data-parallel replicas: make it a multiple of " +
                 std::to_string(c.dp));
  const int64_t pieces = static_cast<int64_t>(c.dp) * grad_accum;
  if (global_batch % pieces != 0)
    return Error("--batch " + std::to_string(global_batch) + " does not split over " +
                 std::to_string(c.dp) + " replicas x " + std::to_string(grad_accum) +
                 " micro-batches (--grad-accum): make it a multiple of " + std::to_string(pieces));
  return c;
}

Status setPipelineShape(ParallelConfig &c, int virtual_stages, std::vector<int> stage_layers) {
  if (virtual_stages < 1 || virtual_stages > kMaxGradAccum)
    return Error("--virtual-stages " + std::to_string(virtual_stages) + ": expected 1 to " +
                 std::to_string(kMaxGradAccum));
  if (virtual_stages > 1 && c.pp < 2)
    return Error("--virtual-stages " + std::to_string(virtual_stages) +
                 " interleaves the model stages of a pipeline: it needs --pp 2 or more");
  if (virtual_stages > 1 && c.grad_accum % c.pp != 0)
    return Error("--virtual-stages " + std::to_string(virtual_stages) + " with --pp " +
                 std::to_string(c.pp) + ": the interleaved schedule runs the micro-batches in " +
                 "groups of " + std::to_string(c.pp) + ", so --micro-batches " +
                 std::to_string(c.grad_accum) + " must be a multiple of " + std::to_string(c.pp));
  if (!stage_layers.empty() && c.pp < 2)
    return Error("--pp-layers splits the layers over pipeline stages: it needs --pp 2 or more");
  const int64_t stages = int64_t{c.pp} * virtual_stages;
  if (!stage_layers.empty() && static_cast<int64_t>(stage_layers.size()) != stages)
    return Error(
        "--pp-layers " + joined(stage_layers, ",") + ": " + std::to_string(stage_layers.size()) +
        " counts for " + std::to_string(stages) + " model stages (--pp " + std::to_string(c.pp) +
        (virtual_stages > 1 ? " x --virtual-stages " + std::to_string(virtual_stages) : "") +
        "): give one count per model stage, in model order");
  for (int n : stage_layers)
    if (n < 1)
      return Error("--pp-layers " + joined(stage_layers, ",") +
                   ": every stage needs at least one layer");
  c.virtual_stages = virtual_stages;
  c.stage_layers = std::move(stage_layers);
  return Status::ok();
}

Expected<std::vector<int>> parseStageLayers(const std::string &text) {
  std::vector<int> counts;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    int n = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), n);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || n < 1)
      return Error("--pp-layers '" + text +
                   "': expected positive layer counts separated by commas, e.g. 9,10,10,11");
    counts.push_back(n);
    at = comma + 1;
  }
  return counts;
}

Expected<std::vector<int>> layerStages(const ParallelConfig &c, int64_t layers) {
  const int stages = c.modelStages();
  const std::string shape =
      "--pp " + std::to_string(c.pp) +
      (c.virtual_stages > 1 ? " x --virtual-stages " + std::to_string(c.virtual_stages) : "");
  if (!c.stage_layers.empty()) {
    int64_t sum = 0;
    for (int n : c.stage_layers)
      sum += n;
    if (sum != layers)
      return Error("--pp-layers " + joined(c.stage_layers, ",") + " adds up to " +
                   std::to_string(sum) + " layers; the model has " + std::to_string(layers));
    std::vector<int> stage_of;
    for (int s = 0; s < stages; ++s)
      stage_of.insert(stage_of.end(), c.stage_layers[s], s);
    return stage_of;
  }
  if (layers < stages)
    return Error(shape + ": the model has " + std::to_string(layers) +
                 " transformer layers, fewer than the stages (each stage needs at least one)");
  if (c.virtual_stages > 1 && layers % stages != 0)
    return Error(shape + ": the model's " + std::to_string(layers) +
                 " transformer layers do not split evenly over " + std::to_string(stages) +
                 " model stages; choose sizes whose product divides them, or give each stage's "
                 "count with --pp-layers");
  return balancedLayerStages(layers, stages);
}

std::vector<std::vector<size_t>> updateBuckets(const std::vector<int64_t> &param_bytes,
                                               const std::vector<size_t> &members) {
  int64_t total = 0, largest = 0;
  for (size_t i : members) {
    total += param_bytes[i];
    largest = std::max(largest, param_bytes[i]);
  }
  const int64_t cap = std::max(largest, (total + kUpdateBuckets - 1) / kUpdateBuckets);
  std::vector<std::vector<size_t>> buckets;
  int64_t filled = 0;
  for (size_t i : members) {
    if (buckets.empty() || filled + param_bytes[i] > cap) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(i);
    filled += param_bytes[i];
  }
  return buckets;
}

} // namespace kiln::parallel
