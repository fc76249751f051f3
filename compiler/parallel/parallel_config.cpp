#include "compiler/parallel/parallel_config.h"

#include <algorithm>
#include <numeric>

namespace kiln::parallel {

std::string ParallelConfig::toString() const {
  return std::to_string(devices) + " device" + (devices == 1 ? "" : "s") + ": dp " +
         std::to_string(dp) + " x tp " + std::to_string(tp) + ", zero " + std::to_string(zero) +
         (sequenceParallel() ? ", sequence parallel" : "") +
         (pp > 1 ? ", pp " + std::to_string(pp) : "") +
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
