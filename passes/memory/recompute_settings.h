// What a job recomputes in the backward instead of keeping from the forward
// (RecomputePass): Megatron's and MindFormers' activation recomputation.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

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

} // namespace kiln::passes
