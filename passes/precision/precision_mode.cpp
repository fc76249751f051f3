#include "passes/precision/precision_mode.h"

namespace kiln::passes {

namespace {

constexpr PrecisionMode kModes[] = {PrecisionMode::ForceFp32,
                                    PrecisionMode::ForceFp16,
                                    PrecisionMode::AllowFp32ToFp16,
                                    PrecisionMode::MustKeepOriginDType,
                                    PrecisionMode::AllowMixPrecisionFp16,
                                    PrecisionMode::AllowMixPrecisionBf16,
                                    PrecisionMode::ForceLowerPrecision};

struct V2Name {
  std::string_view name;
  PrecisionMode mode;
};
// ATC's table (CANN's fe_context_utils.cc maps V2 names onto the v1 enum).
constexpr V2Name kV2Names[] = {{"fp16", PrecisionMode::ForceFp16},
                               {"origin", PrecisionMode::MustKeepOriginDType},
                               {"cube_fp16in_fp32out", PrecisionMode::ForceFp32},
                               {"mixed_float16", PrecisionMode::AllowMixPrecisionFp16},
                               {"mixed_bfloat16", PrecisionMode::AllowMixPrecisionBf16},
                               {"mixed_bf16", PrecisionMode::AllowMixPrecisionBf16}};

} // namespace

std::string_view precisionModeName(PrecisionMode mode) {
  switch (mode) {
  case PrecisionMode::MustKeepOriginDType:
    return "must_keep_origin_dtype";
  case PrecisionMode::ForceFp32:
    return "force_fp32";
  case PrecisionMode::ForceFp16:
    return "force_fp16";
  case PrecisionMode::AllowFp32ToFp16:
    return "allow_fp32_to_fp16";
  case PrecisionMode::AllowMixPrecisionFp16:
    return "allow_mix_precision_fp16";
  case PrecisionMode::AllowMixPrecisionBf16:
    return "allow_mix_precision_bf16";
  case PrecisionMode::ForceLowerPrecision:
    return "force_lowerprecision";
  }
  return "?";
}

std::optional<PrecisionMode> parsePrecisionMode(std::string_view name) {
  if (name == "cube_fp16in_fp32out")
    return PrecisionMode::ForceFp32;
  if (name == "allow_mix_precision")
    return PrecisionMode::AllowMixPrecisionFp16;
  for (PrecisionMode m : kModes)
    if (precisionModeName(m) == name)
      return m;
  return std::nullopt;
}

std::string precisionModeNames() {
  std::string s;
  for (PrecisionMode m : kModes)
    s += (s.empty() ? "" : ", ") + std::string(precisionModeName(m));
  return s + " (aliases: cube_fp16in_fp32out, allow_mix_precision)";
}

std::optional<PrecisionMode> parsePrecisionModeV2(std::string_view name) {
  for (const V2Name &v : kV2Names)
    if (v.name == name)
      return v.mode;
  return std::nullopt;
}

std::string precisionModeV2Names() {
  std::string s;
  for (const V2Name &v : kV2Names)
    s += (s.empty() ? "" : ", ") + std::string(v.name);
  return s;
}

bool isMixedPrecision(PrecisionMode mode) {
  return mode == PrecisionMode::AllowMixPrecisionFp16 ||
         mode == PrecisionMode::AllowMixPrecisionBf16;
}

std::optional<DType> lowDType(PrecisionMode mode) {
  switch (mode) {
  case PrecisionMode::ForceFp16:
  case PrecisionMode::AllowFp32ToFp16:
  case PrecisionMode::AllowMixPrecisionFp16:
    return DType::F16;
  case PrecisionMode::AllowMixPrecisionBf16:
    return DType::BF16;
  default:
    return std::nullopt;
  }
}

} // namespace kiln::passes
