#include "runtime/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace kiln::runtime {

double LrSchedule::at(int64_t step) const {
  if (step < warmup)
    return lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (kind == Kind::Constant)
    return lr;
  const int64_t decay_steps = std::max<int64_t>(1, steps - warmup);
  const double progress =
      std::min(1.0, static_cast<double>(step - warmup) / static_cast<double>(decay_steps));
  return min_lr + 0.5 * (1.0 + std::cos(M_PI * progress)) * (lr - min_lr);
}

Expected<LrSchedule::Kind> parseSchedule(const std::string &text) {
  if (text == "cosine")
    return LrSchedule::Kind::Cosine;
  if (text == "constant")
    return LrSchedule::Kind::Constant;
  return Error("--schedule '" + text + "': expected cosine or constant");
}

} // namespace kiln::runtime
