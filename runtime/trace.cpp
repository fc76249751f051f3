#include "runtime/trace.h"

#include <nlohmann/json.hpp>

#include "support/file_io.h"

namespace kiln::runtime {

Trace::Trace(int devices) : devices_(devices), origin_(std::chrono::steady_clock::now()) {}

int64_t Trace::now() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                               origin_)
      .count();
}

void Trace::add(int device, std::string name, int64_t start_us, int64_t end_us, int64_t step) {
  events_.push_back({device, std::move(name), start_us, end_us - start_us, step});
}

Status Trace::write(const std::string &path) const {
  nlohmann::json events = nlohmann::json::array();
  events.push_back(
      {{"ph", "M"}, {"name", "process_name"}, {"pid", 0}, {"args", {{"name", "kiln"}}}});
  for (int d = 0; d < devices_; ++d)
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", 0},
                      {"tid", d},
                      {"args", {{"name", "npu:" + std::to_string(d)}}}});
  for (const Event &e : events_)
    events.push_back({{"ph", "X"},
                      {"name", e.name},
                      {"pid", 0},
                      {"tid", e.device},
                      {"ts", e.start},
                      {"dur", e.duration},
                      {"args", {{"step", e.step}}}});
  nlohmann::json doc = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  return writeFileAtomic(path, doc.dump() + "\n");
}

} // namespace kiln::runtime
