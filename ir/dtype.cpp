#include "ir/dtype.h"

namespace kiln {

std::string_view dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  case DType::Bool:
    return "bool";
  }
  return "?";
}

std::optional<DType> parseDType(std::string_view name) {
  for (DType d : kAllDTypes)
    if (dtypeName(d) == name)
      return d;
  if (name == "float32")
    return DType::F32;
  if (name == "float16")
    return DType::F16;
  if (name == "bfloat16")
    return DType::BF16;
  if (name == "int32")
    return DType::I32;
  if (name == "int64")
    return DType::I64;
  return std::nullopt;
}

size_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I64:
    return 8;
  case DType::Bool:
    return 1;
  }
  return 0;
}

bool isFloat(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16;
}

bool isInteger(DType dtype) { return dtype == DType::I32 || dtype == DType::I64; }

double lowestFinite(DType dtype) {
  switch (dtype) {
  case DType::F16:
    return -65504.0;
  case DType::BF16:
    return -3.3895313892515355e38;
  default:
    return -3.4028234663852886e38;
  }
}

std::string_view overflowModeName(OverflowMode mode) {
  return mode == OverflowMode::Saturation ? "saturation" : "infnan";
}

std::optional<OverflowMode> parseOverflowMode(std::string_view name) {
  if (name == "saturation")
    return OverflowMode::Saturation;
  if (name == "infnan")
    return OverflowMode::InfNan;
  return std::nullopt;
}

} // namespace kiln
