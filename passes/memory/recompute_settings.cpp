#include "passes/memory/recompute_settings.h"

namespace kiln::passes {

std::string_view recomputeModeName(RecomputeMode mode) {
  switch (mode) {
  case RecomputeMode::None:
    return "none";
  case RecomputeMode::Selective:
    return "selective";
  case RecomputeMode::Full:
    return "full";
  }
  return "none";
}

std::optional<RecomputeMode> parseRecomputeMode(std::string_view name) {
  for (RecomputeMode m : {RecomputeMode::None, RecomputeMode::Selective, RecomputeMode::Full})
    if (recomputeModeName(m) == name)
      return m;
  return std::nullopt;
}

std::string RecomputeSettings::toString() const {
  std::string s(recomputeModeName(mode));
  if (mode == RecomputeMode::None || layers.empty())
    return s;
  std::string list;
  for (int64_t l : layers)
    list += (list.empty() ? "" : ",") + std::to_string(l);
  return s + " (layers " + list + ")";
}

} // namespace kiln::passes
