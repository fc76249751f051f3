#include "runtime/device.h"

#include <algorithm>

namespace kiln::runtime {

DeviceMemory::DeviceMemory(std::string device, int64_t capacity_bytes)
    : device_(std::move(device)), capacity_(capacity_bytes) {}

Error outOfDeviceMemory(const std::string &device, const std::string &need, int64_t capacity,
                        const std::string &buffers_title,
                        const std::vector<std::pair<std::string, int64_t>> &buffers) {
  std::string text = device + ": out of device memory: " + need + ", the device has " +
                     formatBytes(capacity) + "; " + buffers_title + ":";
  for (const auto &[name, size] : buffers)
    text += "\n    " + name + ": " + formatBytes(size);
  return Error(text + "\n  lower --batch or --seq, use more devices (--dp, --tp) or --zero 1, or "
                      "raise --device-memory");
}

Status DeviceMemory::allocate(const std::string &buffer, int64_t bytes) {
  if (live_ + bytes > capacity_)
    return outOfDeviceMemory(device_,
                             "allocating '" + buffer + "' (" + formatBytes(bytes) + ") needs " +
                                 formatBytes(live_ + bytes) + " at this point (peak so far " +
                                 formatBytes(std::max(peak_, live_)) + ")",
                             capacity_, "the largest buffers alive", largest(5));
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
