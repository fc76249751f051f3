// The learning rate of each step: linear warmup from lr / warmup to lr over
// the first `warmup` steps, then constant or a cosine decay to min_lr at the
// last step (nanoGPT's schedule; MindFormers' "cosine" with warmup).
#pragma once

#include <cstdint>
#include <string>

#include "support/error.h"

namespace kiln::runtime {

struct LrSchedule {
  enum class Kind { Constant, Cosine } kind = Kind::Cosine;
  double lr = 3e-4;
  double min_lr = 3e-5; // cosine's floor
  int64_t warmup = 0;
  int64_t steps = 1; // the whole run: cosine reaches min_lr at its end

  double at(int64_t step) const; // step counts from 0
};

Expected<LrSchedule::Kind> parseSchedule(const std::string &text);

} // namespace kiln::runtime
