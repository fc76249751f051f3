// A Chrome / Perfetto trace (the JSON "trace event" format chrome://tracing
// and ui.perfetto.dev open): one track per device, one complete event per
// phase a device ran (forward and backward, allreduce, update).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "support/error.h"

namespace kiln::runtime {

class Trace {
public:
  explicit Trace(int devices);
  // Microseconds since the trace began.
  int64_t now() const;
  void add(int device, std::string name, int64_t start_us, int64_t end_us, int64_t step);
  Status write(const std::string &path) const;

private:
  struct Event {
    int device;
    std::string name;
    int64_t start, duration, step;
  };
  int devices_;
  std::chrono::steady_clock::time_point origin_;
  std::vector<Event> events_;
};

} // namespace kiln::runtime
