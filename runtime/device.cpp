#include "runtime/device.h"

#include <algorithm>

namespace kiln::runtime {

DeviceMemory::DeviceMemory(std::string device, int64_t capacity_bytes)
    : device_(std::move(device)), capacity_(capacity_bytes) {}

Status DeviceMemory::allocate(const std::string &buffer, int64_t bytes) {
  if (live_ + bytes > capacity_) {
    std::string top;
    for (const auto &[name, size] : largest(5))
      top += "\n    " + name + ": " + formatBytes(size);
    return Error(device_ + ": out of device memory: allocating '" + buffer + "' (" +
                 formatBytes(bytes) + ") needs " + formatBytes(live_ + bytes) +
                 " at this point, the device has " + formatBytes(capacity_) + " (peak so far " +
                 formatBytes(std::max(peak_, live_)) + "); the largest buffers alive:" + top +
                 "\n  lower --batch or --seq, use more devices (--dp, --tp) or --zero 1, or "
                 "raise --device-memory");
  }
  auto [it, fresh] = buffers_.emplace(buffer, bytes);
  if (!fresh) {
    live_ -= it->second;
    it->second = bytes;
  }
  live_ += bytes;
  peak_ = std::max(peak_, live_);
  return Status::ok();
}

void DeviceMemory::release(const std::string &buffer) {
  auto it = buffers_.find(buffer);
  if (it == buffers_.end())
    return;
  live_ -= it->second;
  buffers_.erase(it);
}

std::vector<std::pair<std::string, int64_t>> DeviceMemory::largest(size_t n) const {
  std::vector<std::pair<std::string, int64_t>> all(buffers_.begin(), buffers_.end());
  std::sort(all.begin(), all.end(), [](const auto &a, const auto &b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  if (all.size() > n)
    all.resize(n);
  return all;
}

} // namespace kiln::runtime
