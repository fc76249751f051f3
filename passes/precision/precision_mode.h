// CANN's precision_mode: how a job lowers a model's float dtypes.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "ir/dtype.h"

namespace kiln::passes {

enum class PrecisionMode : uint8_t {
  MustKeepOriginDType,   // every op keeps the model's dtype
  ForceFp32,             // every float op in f32 (CANN: force_fp32 = cube_fp16in_fp32out)
  ForceFp16,             // every float op in f16
  AllowFp32ToFp16,       // cube ops (matmuls) in f16, the rest keeps its dtype
  AllowMixPrecisionFp16, // AMP lists with f16 as the low dtype (allow_mix_precision)
  AllowMixPrecisionBf16, // AMP lists with bf16 (910B and later)
  ForceLowerPrecision,   // every f32 op in bf16 where the chip has it, else f16; f16/bf16 stay
};

// CANN's canonical spelling.
std::string_view precisionModeName(PrecisionMode mode);
// Also CANN's aliases: cube_fp16in_fp32out, allow_mix_precision.
std::optional<PrecisionMode> parsePrecisionMode(std::string_view name);
// "force_fp32, force_fp16, ..." for messages.
std::string precisionModeNames();

// CANN's precision_mode_v2 (ATC --precision_mode_v2), the same modes under
// clearer names: fp16 = force_fp16, origin = must_keep_origin_dtype,
// cube_fp16in_fp32out = force_fp32, mixed_float16 = allow_mix_precision_fp16,
// mixed_bfloat16 (also mixed_bf16) = allow_mix_precision_bf16.
std::optional<PrecisionMode> parsePrecisionModeV2(std::string_view name);
std::string precisionModeV2Names();

bool isMixedPrecision(PrecisionMode mode);
// The low-precision dtype a mode computes cube ops in, if any
// (force_lowerprecision: none here, it depends on the target).
std::optional<DType> lowDType(PrecisionMode mode);

} // namespace kiln::passes
