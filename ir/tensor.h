// A dense host tensor: a TensorType and its bytes in the dtype's storage format
// (f16/bf16 as 16-bit patterns).
//
// Tensors are values whose bytes are shared until written: copying one (into
// an input map, an executor's value table, a reshaped view) costs a reference
// count, and the first write through a non-const accessor of a tensor whose
// bytes are shared copies them first. Read through const accessors where a
// copy is not meant to be made.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "ir/shape.h"

namespace kiln {

class Tensor {
public:
  Tensor() = default;
  // Zero-filled tensor of `type`.
  explicit Tensor(TensorType type);
  // A tensor of `type` whose bytes are not initialised, for a writer that
  // fills every element (a compiled kernel's output).
  static Tensor uninitialized(TensorType type);
  // A tensor of `type` whose bytes lie at `offset` inside `block`, which
  // another owner allocated (a device's arena): the tensor keeps the block
  // alive and is the only writer of its bytes until it is copied.
  static Tensor view(TensorType type, const std::shared_ptr<uint8_t[]> &block, size_t offset);
  // An uninitialised block of `bytes` aligned to `alignment` (a power of
  // two) for views to lie in, counted in bytesAllocated().
  static std::shared_ptr<uint8_t[]> allocateBlock(size_t bytes, size_t alignment);

  static Tensor fromFloats(DType dtype, Shape shape, const std::vector<float> &values,
                           OverflowMode mode = OverflowMode::InfNan);
  static Tensor fromInts(DType dtype, Shape shape, const std::vector<int64_t> &values);
  static Tensor scalar(DType dtype, double value, OverflowMode mode = OverflowMode::InfNan);

  const TensorType &type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  const Shape &shape() const { return type_.shape; }
  int64_t numElements() const { return type_.numElements(); }
  size_t byteSize() const { return size_; }

  // Writable bytes: this tensor's own (copied first if they are shared).
  void *data() {
    makeUnique();
    return bytes_.get();
  }
  const void *data() const { return bytes_.get(); }
  template <typename T> T *dataAs() { return reinterpret_cast<T *>(data()); }
  template <typename T> const T *dataAs() const { return reinterpret_cast<const T *>(data()); }
  // Whether no other tensor shares these bytes (a write copies nothing).
  bool holdsBytesAlone() const { return bytes_ != nullptr && bytes_.use_count() == 1; }
  // Whether `other` reads the same bytes (a copy not yet written).
  bool sharesBytesWith(const Tensor &other) const {
    return bytes_ != nullptr && bytes_ == other.bytes_;
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
  // The same elements in bytes of its own: a value kept past the life of
  // the buffer it lies in (a view into an arena whose bytes are reused).
  Tensor copy() const;

  // Bytes copied so far in this process by writes to shared bytes (the
  // profiler reports it per step: a step that copies none keeps each
  // weight once).
  static uint64_t bytesCopied();
  // Bytes allocated so far in this process for tensors' storage: their own
  // and the blocks views lie in.
  static uint64_t bytesAllocated();

  bool operator==(const Tensor &other) const {
    return type_ == other.type_ && size_ == other.size_ &&
           (size_ == 0 || std::memcmp(bytes_.get(), other.bytes_.get(), size_) == 0);
  }

private:
  void makeUnique();

  TensorType type_;
  std::shared_ptr<uint8_t[]> bytes_;
  size_t size_ = 0;
};

} // namespace kiln
