// A simulated device's float-status register (ir/float_status.h says what
// sets it). The executor raises it for every kernel that overflowed on the
// device; the trainer reads and clears it around each step on every device,
// as MindSpore's NPUAllocFloatStatus / NPUGetFloatStatus /
// NPUClearFloatStatus do, and an overflow on any device skips the update on
// all of them.
#pragma once

#include <cstdint>

namespace kiln::runtime {

class FloatStatus {
public:
  void raise(uint32_t bits) { bits_ |= bits; }
  uint32_t get() const { return bits_; }
  bool overflowed() const { return bits_ != 0; }
  void clear() { bits_ = 0; }

private:
  uint32_t bits_ = 0;
};

} // namespace kiln::runtime
