// Loss scaling for low-precision training, with MindSpore's semantics
// (DynamicLossScaleManager / DynamicLossScaleUpdateCell): the loss is
// multiplied by the scale before the backward pass; when a gradient is not
// finite the update is skipped on every device and the scale drops to
// max(scale / factor, 1); after `window` steps without overflow it grows by
// `factor`. More than 1000 overflows in a row stop the training.
#pragma once

#include <cstdint>
#include <string>

#include "support/error.h"

namespace kiln::runtime {

// The largest loss scale kiln accepts or grows to (2^64): beyond it every
// fp16/bf16 gradient overflows and an f32 scalar is soon inf.
inline constexpr double kMaxLossScale = 18446744073709551616.0;

struct LossScaleSpec {
  enum class Kind { Dynamic, Fixed, None } kind = Kind::Dynamic;
  double init = 16777216.0; // 2^24, MindSpore's DynamicLossScaleManager
  double factor = 2.0;
  int64_t window = 2000;
  std::string toString() const; // "dynamic:16777216,2,2000"
};

// "dynamic" (MindSpore's defaults), "dynamic:INIT,FACTOR,WINDOW",
// "mindformers" (MindFormers' Qwen preset: dynamic 65536, 2, 1000),
// "fixed:S" (FixedLossScaleManager, overflowing updates dropped) or "none".
Expected<LossScaleSpec> parseLossScale(const std::string &text);

class LossScaler {
public:
  static constexpr int64_t kMaxConsecutiveOverflows = 1000;

  explicit LossScaler(const LossScaleSpec &spec);
  double scale() const { return scale_; }
  // After a step: adjusts the scale; an error after too many overflows in a row.
  Status update(bool overflow);

  // The state a checkpoint keeps, so a resumed run scales as an unbroken one.
  int64_t goodSteps() const { return good_steps_; }
  int64_t overflowsInARow() const { return overflows_in_a_row_; }
  void restore(double scale, int64_t good_steps, int64_t overflows_in_a_row);

private:
  LossScaleSpec spec_;
  double scale_;
  int64_t good_steps_ = 0;
  int64_t overflows_in_a_row_ = 0;
};

} // namespace kiln::runtime
