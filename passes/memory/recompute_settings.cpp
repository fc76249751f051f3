#include "passes/memory/recompute_settings.h"

#include "passes/pass_context.h"

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

std::vector<PassOptionInfo> recomputeOptions() {
  return {{.name = "mode",
           .type = PassOptionType::Choice,
           .default_value = "none",
           .description = "none: keep every activation the backward reads; selective: recompute "
                          "each attention core (the s x s tensors); full: keep each layer's "
                          "input and run its forward again before its backward",
           .choices = {"none", "selective", "full"}},
          {.name = "layers",
           .type = PassOptionType::IntSet,
           .default_value = "",
           .description = "the transformer layers it recomputes (empty: every layer)"}};
}

RecomputeSettings recomputeSettings(const PassContext &ctx) {
  const PassOptions options = ctx.options(kRecomputePassName);
  RecomputeSettings s;
  s.mode = parseRecomputeMode(options.getChoice("mode")).value_or(RecomputeMode::None);
  s.layers = options.getInts("layers");
  return s;
}

} // namespace kiln::passes
