// What a job recomputes in the backward instead of keeping from the forward
// (RecomputePass): Megatron's and MindFormers' activation recomputation.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "passes/pass_options.h"

namespace kiln::passes {

enum class RecomputeMode : uint8_t {
  None,      // keep every activation the backward reads
  Selective, // recompute each attention core (scores, mask, softmax): the s x s tensors
  Full,      // keep each layer's input, re-run the layer's forward before its backward
};

std::string_view recomputeModeName(RecomputeMode mode);
std::optional<RecomputeMode> parseRecomputeMode(std::string_view name);
inline constexpr const char *kRecomputeModeNames = "none, selective, full";

struct RecomputeSettings {
  RecomputeMode mode = RecomputeMode::None;
  // The transformer layers it applies to; empty: every layer.
  std::set<int64_t> layers;
  bool covers(int64_t layer) const { return layers.empty() || layers.count(layer) > 0; }
  // "full", "selective (layers 0,1,5)"
  std::string toString() const;
};

inline constexpr const char *kRecomputePassName = "RecomputePass";

// RecomputePass's options (PassInfo::options): "mode" (none, selective,
// full; --recompute) and "layers" (--recompute-layers).
std::vector<PassOptionInfo> recomputeOptions();

class PassContext;
// What the job recomputes: RecomputePass's options in `ctx`.
RecomputeSettings recomputeSettings(const PassContext &ctx);

} // namespace kiln::passes
