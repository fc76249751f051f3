// A dense host tensor: a TensorType and its bytes in the dtype's storage format
// (f16/bf16 as 16-bit patterns).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "ir/shape.h"

namespace kiln {

class Tensor {
public:
  Tensor() = default;
  // Zero-filled tensor of `type`.
  explicit Tensor(TensorType type);

  static Tensor fromFloats(DType dtype, Shape shape, const std::vector<float> &values,
                           OverflowMode mode = OverflowMode::InfNan);
  static Tensor fromInts(DType dtype, Shape shape, const std::vector<int64_t> &values);
  static Tensor scalar(DType dtype, double value, OverflowMode mode = OverflowMode::InfNan);

  const TensorType &type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  const Shape &shape() const { return type_.shape; }
  int64_t numElements() const { return type_.numElements(); }
  size_t byteSize() const { return bytes_.size(); }

  void *data() { return bytes_.data(); }
  const void *data() const { return bytes_.data(); }
  template <typename T> T *dataAs() { return reinterpret_cast<T *>(bytes_.data()); }
  template <typename T> const T *dataAs() const {
    return reinterpret_cast<const T *>(bytes_.data());
  }

  // Element access converting from/to the storage type; floats round per `mode`.
  float getFloat(int64_t index) const;
  void setFloat(int64_t index, float value, OverflowMode mode);
  int64_t getInt(int64_t index) const;
  void setInt(int64_t index, int64_t value);

  std::vector<float> toFloats() const;
  // Same elements converted to `dtype` (floats round per `mode`).
  Tensor castTo(DType dtype, OverflowMode mode = OverflowMode::InfNan) const;
  // Same bytes with another shape of the same element count.
  Tensor reshaped(Shape shape) const;

  bool operator==(const Tensor &other) const {
    return type_ == other.type_ && bytes_ == other.bytes_;
  }

private:
  TensorType type_;
  std::vector<uint8_t> bytes_;
};

} // namespace kiln
