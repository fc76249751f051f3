// Element types of kiln tensors and the overflow modes of 16-bit float rounding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

enum class DType : uint8_t { F32, F16, BF16, I32, I64, Bool };

inline constexpr DType kAllDTypes[] = {DType::F32, DType::F16, DType::BF16,
                                       DType::I32, DType::I64, DType::Bool};

// Short lower-case name used in text, JSON and CLI flags: f32, f16, bf16, i32, i64, bool.
std::string_view dtypeName(DType dtype);
// Accepts the short names and the long ones (float32, float16, bfloat16, int32, int64).
std::optional<DType> parseDType(std::string_view name);
size_t dtypeSize(DType dtype);
bool isFloat(DType dtype);
bool isInteger(DType dtype);
// The most negative finite value of a float dtype (torch.finfo(dtype).min),
// which modeling_qwen.py fills masked attention scores with.
double lowestFinite(DType dtype);

// How a float result that does not fit its storage type is rounded
// (aclrtFloatOverflowMode): SATURATION clamps to the largest finite value and
// turns NaN into 0; INFNAN follows IEEE 754 (overflow becomes +-inf).
enum class OverflowMode : uint8_t { Saturation, InfNan };

std::string_view overflowModeName(OverflowMode mode);
std::optional<OverflowMode> parseOverflowMode(std::string_view name);

} // namespace kiln
