#include "ir/tensor.h"

#include <atomic>
#include <cassert>
#include <cmath>
#include <limits>
#include <new>

#include "ir/float16.h"

namespace kiln {

namespace {

// Float to integer truncates toward zero and saturates, NaN becoming 0, as NPU
// conversions do; a plain cast is undefined behaviour outside the range.
template <typename Int, typename Float> Int floatToInt(Float value) {
  if (std::isnan(value))
    return 0;
  // -2^(bits-1) is exact in float; 2^(bits-1) is the first value past the maximum.
  constexpr Float kLimit = -static_cast<Float>(std::numeric_limits<Int>::min());
  if (value >= kLimit)
    return std::numeric_limits<Int>::max();
  if (value < -kLimit)
    return std::numeric_limits<Int>::min();
  return static_cast<Int>(value);
}

} // namespace

Tensor::Tensor(TensorType type) : Tensor(uninitialized(std::move(type))) {
  if (size_ > 0)
    std::memset(bytes_.get(), 0, size_);
}

namespace {
std::atomic<uint64_t> g_bytes_copied{0};
std::atomic<uint64_t> g_bytes_allocated{0};
} // namespace

Tensor Tensor::uninitialized(TensorType type) {
  Tensor t;
  t.type_ = std::move(type);
  t.size_ = static_cast<size_t>(t.type_.numElements()) * dtypeSize(t.type_.dtype);
  // new[] without a value-initialiser leaves the bytes as they are.
  if (t.size_ > 0) {
    g_bytes_allocated.fetch_add(t.size_, std::memory_order_relaxed);
    t.bytes_ = std::shared_ptr<uint8_t[]>(new uint8_t[t.size_]);
  }
  return t;
}

Tensor Tensor::view(TensorType type, const std::shared_ptr<uint8_t[]> &block, size_t offset) {
  Tensor t;
  t.type_ = std::move(type);
  t.size_ = static_cast<size_t>(t.type_.numElements()) * dtypeSize(t.type_.dtype);
  // A control block of its own (not the block's aliasing one), so that the
  // copy-on-write count sees this tensor's copies only, not the other views.
  if (t.size_ > 0)
    t.bytes_ = std::shared_ptr<uint8_t[]>(block.get() + offset, [block](uint8_t *) {});
  return t;
}

std::shared_ptr<uint8_t[]> Tensor::allocateBlock(size_t bytes, size_t alignment) {
  const std::align_val_t align{alignment};
  g_bytes_allocated.fetch_add(bytes, std::memory_order_relaxed);
  return std::shared_ptr<uint8_t[]>(static_cast<uint8_t *>(::operator new[](bytes, align)),
                                    [align](uint8_t *p) { ::operator delete[](p, align); });
}

uint64_t Tensor::bytesCopied() { return g_bytes_copied.load(std::memory_order_relaxed); }
uint64_t Tensor::bytesAllocated() { return g_bytes_allocated.load(std::memory_order_relaxed); }

void Tensor::makeUnique() {
  if (!bytes_ || bytes_.use_count() == 1)
    return;
  g_bytes_copied.fetch_add(size_, std::memory_order_relaxed);
  g_bytes_allocated.fetch_add(size_, std::memory_order_relaxed);
  std::shared_ptr<uint8_t[]> own(new uint8_t[size_]);
  std::memcpy(own.get(), bytes_.get(), size_);
  bytes_ = std::move(own);
}

Tensor Tensor::fromFloats(DType dtype, Shape shape, const std::vector<float> &values,
                          OverflowMode mode) {
  Tensor t(TensorType{dtype, std::move(shape)});
  assert(static_cast<int64_t>(values.size()) == t.numElements());
  for (size_t i = 0; i < values.size(); ++i)
    t.setFloat(static_cast<int64_t>(i), values[i], mode);
  return t;
}

Tensor Tensor::fromInts(DType dtype, Shape shape, const std::vector<int64_t> &values) {
  Tensor t(TensorType{dtype, std::move(shape)});
  assert(static_cast<int64_t>(values.size()) == t.numElements());
  for (size_t i = 0; i < values.size(); ++i)
    t.setInt(static_cast<int64_t>(i), values[i]);
  return t;
}

Tensor Tensor::scalar(DType dtype, double value, OverflowMode mode) {
  Tensor t(TensorType{dtype, {}});
  if (isFloat(dtype))
    t.setFloat(0, static_cast<float>(value), mode);
  else if (dtype == DType::I32)
    t.setInt(0, floatToInt<int32_t>(value));
  else if (dtype == DType::I64)
    t.setInt(0, floatToInt<int64_t>(value)); // from double: exact up to 2^53
  else
    t.setInt(0, value != 0.0);
  return t;
}

float Tensor::getFloat(int64_t i) const {
  switch (type_.dtype) {
  case DType::F32:
    return dataAs<float>()[i];
  case DType::F16:
    return halfToFloat(dataAs<uint16_t>()[i]);
  case DType::BF16:
    return bfloat16ToFloat(dataAs<uint16_t>()[i]);
  case DType::I32:
    return static_cast<float>(dataAs<int32_t>()[i]);
  case DType::I64:
    return static_cast<float>(dataAs<int64_t>()[i]);
  case DType::Bool:
    return dataAs<uint8_t>()[i] ? 1.0f : 0.0f;
  }
  return 0.0f;
}

void Tensor::setFloat(int64_t i, float value, OverflowMode mode) {
  switch (type_.dtype) {
  case DType::F32:
    dataAs<float>()[i] = roundToDType(value, DType::F32, mode);
    break;
  case DType::F16:
    dataAs<uint16_t>()[i] = floatToHalf(value, mode);
    break;
  case DType::BF16:
    dataAs<uint16_t>()[i] = floatToBFloat16(value, mode);
    break;
  case DType::I32:
    dataAs<int32_t>()[i] = floatToInt<int32_t>(value);
    break;
  case DType::I64:
    dataAs<int64_t>()[i] = floatToInt<int64_t>(value);
    break;
  case DType::Bool:
    dataAs<uint8_t>()[i] = value != 0.0f;
    break;
  }
}

int64_t Tensor::getInt(int64_t i) const {
  switch (type_.dtype) {
  case DType::I32:
    return dataAs<int32_t>()[i];
  case DType::I64:
    return dataAs<int64_t>()[i];
  case DType::Bool:
    return dataAs<uint8_t>()[i];
  default:
    return floatToInt<int64_t>(getFloat(i));
  }
}

void Tensor::setInt(int64_t i, int64_t value) {
  switch (type_.dtype) {
  case DType::I32:
    dataAs<int32_t>()[i] = static_cast<int32_t>(value);
    break;
  case DType::I64:
    dataAs<int64_t>()[i] = value;
    break;
  case DType::Bool:
    dataAs<uint8_t>()[i] = value != 0;
    break;
  default:
    setFloat(i, static_cast<float>(value), OverflowMode::InfNan);
  }
}

std::vector<float> Tensor::toFloats() const {
  std::vector<float> out(numElements());
  for (int64_t i = 0; i < numElements(); ++i)
    out[i] = getFloat(i);
  return out;
}

Tensor Tensor::castTo(DType dtype, OverflowMode mode) const {
  Tensor out(TensorType{dtype, type_.shape});
  const bool integral = !isFloat(dtype) && !isFloat(type_.dtype);
  for (int64_t i = 0; i < numElements(); ++i) {
    if (integral)
      out.setInt(i, getInt(i));
    else
      out.setFloat(i, getFloat(i), mode);
  }
  return out;
}

Tensor Tensor::copy() const {
  Tensor out = uninitialized(type_);
  if (size_ > 0)
    std::memcpy(out.bytes_.get(), bytes_.get(), size_);
  return out;
}

Tensor Tensor::reshaped(Shape shape) const {
  assert(kiln::numElements(shape) == numElements());
  Tensor out = *this;
  out.type_.shape = std::move(shape);
  return out;
}

} // namespace kiln
