// Progress lines for steps that take seconds (planning layouts, compiling
// thousands of kernels, planning Qwen-14B): "kiln: compiling kernels: 40 of
// 88 (3 s)" on stderr, at most one every few seconds, none in the first
// seconds of a run, so a quick command prints nothing more.
//
// A command installs one Reporter for the process (tools/kiln does, when
// stderr is a terminal or KILN_PROGRESS=always); library code calls
// progress::report() where a long step advances, which does nothing when
// none is installed. Like logging, it is a side channel: never part of a
// command's output or its errors.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::progress {

// KILN_PROGRESS: "auto" (or unset: on a terminal only), "always" (a pipe
// too, as soon as a step reports), "never".
enum class Mode { Auto, Always, Never };
std::optional<Mode> parseMode(std::string_view text);
bool shown(Mode mode, bool stderr_is_terminal);

class Reporter {
public:
  using Clock = std::function<double()>;                 // seconds, monotonic
  using Sink = std::function<void(const std::string &)>; // one line, no newline
  // Lines start `delay` seconds after construction and come at least
  // `interval` seconds apart; each ends with the seconds since construction.
  Reporter(Sink sink, double delay, double interval, Clock clock = {});
  void report(std::string_view what);

private:
  Sink sink_;
  double delay_, interval_;
  Clock clock_;
  double start_;
  std::optional<double> last_;
  std::mutex mutex_;
};

// Installs `reporter` for the process until the Scope ends.
class Scope {
public:
  explicit Scope(Reporter &reporter);
  ~Scope();
  Scope(const Scope &) = delete;
  Scope &operator=(const Scope &) = delete;

private:
  Reporter *previous_;
};

// The reporter a command installs: lines on stderr when `shown` says so for
// KILN_PROGRESS's value (null: unset) and whether stderr is a terminal;
// null when none are to be shown. On a terminal they start after 3 s and
// come every 3 s; asked for with "always", at once and every 2 s. An
// unknown value is taken as "auto", and `warning` says so.
std::unique_ptr<Reporter> stderrReporter(const char *env_value, bool stderr_is_terminal,
                                         std::string *warning = nullptr);

// Reports to the installed reporter, if any; safe from any thread.
void report(std::string_view what);

} // namespace kiln::progress
