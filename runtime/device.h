// A simulated NPU: a name, a memory capacity and the accounting of what lives
// in it. The runtime runs a device's kernels on the host CPU (there is no
// Ascend card here); what it simulates faithfully is the budget: every buffer
// a step allocates on the device is counted against the capacity, and a step
// that would exceed it fails with the report a user needs — the device, the
// peak it needed, and the largest buffers alive at that moment.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "support/byte_size.h"
#include "support/error.h"

namespace kiln::runtime {

// The out-of-memory report, one text for the plan and the run: "<device>:
// out of device memory: <need>, the device has <capacity>; <buffers_title>:"
// then the buffers, then what to change.
Error outOfDeviceMemory(const std::string &device, const std::string &need, int64_t capacity,
                        const std::string &buffers_title,
                        const std::vector<std::pair<std::string, int64_t>> &buffers);

class DeviceMemory {
public:
  DeviceMemory(std::string device, int64_t capacity_bytes);

  // Counts `bytes` for `buffer` (unique while alive); an error when the
  // device would hold more than its capacity. Nothing is counted then.
  Status allocate(const std::string &buffer, int64_t bytes);
  void release(const std::string &buffer);
  bool holds(const std::string &buffer) const { return buffers_.count(buffer) > 0; }

  const std::string &device() const { return device_; }
  int64_t capacity() const { return capacity_; }
  int64_t live() const { return live_; }
  int64_t peak() const { return peak_; }
  // Whether `other` holds the same buffers (and had the same peak): two
  // devices that ran the same programs on the same shapes.
  bool sameAs(const DeviceMemory &other) const {
    return live_ == other.live_ && peak_ == other.peak_ && buffers_ == other.buffers_;
  }
  // Takes `other`'s buffers and peak: what running the same program from
  // the same state would have counted on this device.
  void countAs(const DeviceMemory &other) {
    live_ = other.live_;
    peak_ = other.peak_;
    buffers_ = other.buffers_;
  }
  // The `n` largest live buffers, largest first.
  std::vector<std::pair<std::string, int64_t>> largest(size_t n) const;

private:
  std::string device_;
  int64_t capacity_;
  int64_t live_ = 0;
  int64_t peak_ = 0;
  std::map<std::string, int64_t> buffers_;
};

} // namespace kiln::runtime
