// Progress lines: a process-wide reporter, rate-limited.
#include "support/progress.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <iostream>

namespace kiln::progress {
namespace {

std::atomic<Reporter *> installed{nullptr};

double steadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

} // namespace

std::optional<Mode> parseMode(std::string_view text) {
  if (text.empty() || text == "auto")
    return Mode::Auto;
  if (text == "always" || text == "1")
    return Mode::Always;
  if (text == "never" || text == "0")
    return Mode::Never;
  return std::nullopt;
}

bool shown(Mode mode, bool stderr_is_terminal) {
  return mode == Mode::Always || (mode == Mode::Auto && stderr_is_terminal);
}

Reporter::Reporter(Sink sink, double delay, double interval, Clock clock)
    : sink_(std::move(sink)), delay_(delay), interval_(interval),
      clock_(clock ? std::move(clock) : Clock(steadySeconds)), start_(clock_()) {}

void Reporter::report(std::string_view what) {
  std::lock_guard<std::mutex> lock(mutex_);
  const double now = clock_(), elapsed = now - start_;
  if (elapsed < delay_ || (last_ && now - *last_ < interval_))
    return;
  last_ = now;
  sink_("kiln: " + std::string(what) + " (" + std::to_string(std::lround(elapsed)) + " s)");
}

Scope::Scope(Reporter &reporter) : previous_(installed.exchange(&reporter)) {}

Scope::~Scope() { installed.store(previous_); }

std::unique_ptr<Reporter> stderrReporter(const char *env_value, bool stderr_is_terminal,
                                         std::string *warning) {
  std::optional<Mode> mode = parseMode(env_value ? env_value : "");
  if (!mode && warning)
    *warning = "KILN_PROGRESS='" + std::string(env_value) +
               "' is not auto, always or never; taken as auto";
  if (!shown(mode.value_or(Mode::Auto), stderr_is_terminal))
    return nullptr;
  const bool asked = mode == Mode::Always;
  return std::make_unique<Reporter>([](const std::string &line) { std::cerr << line << "\n"; },
                                    asked ? 0.0 : 3.0, asked ? 2.0 : 3.0);
}

void report(std::string_view what) {
  if (Reporter *r = installed.load())
    r->report(what);
}

} // namespace kiln::progress
