// Whether a pass may do something — apply to a job, fuse a candidate — and
// when not, why: XLA's FusionDecision, Inductor's WhyNoFuse. Every check of
// the fusion passes and the rule engine returns one; the reason is what the
// pass reports for the candidate it did not fuse.
#pragma once

#include <string>
#include <utility>

namespace kiln::passes {

class [[nodiscard]] Verdict {
public:
  static Verdict allow() { return Verdict(); }
  // `reason` names what and why ("'mm' is already in fused group ...").
  static Verdict forbid(std::string reason) { return Verdict(std::move(reason)); }

  bool allowed() const { return !forbidden_; }
  explicit operator bool() const { return allowed(); }
  const std::string &reason() const { return reason_; } // empty when allowed

  // This verdict when it forbids, else `next()`'s: checks in order, the
  // first refusal wins, and a later check runs only when the earlier allow.
  template <typename Next> Verdict andThen(Next &&next) const {
    return allowed() ? Verdict(next()) : *this;
  }

private:
  Verdict() = default;
  explicit Verdict(std::string reason) : forbidden_(true), reason_(std::move(reason)) {}
  bool forbidden_ = false;
  std::string reason_;
};

} // namespace kiln::passes
