// Progress lines: none in a run's first seconds, then rate-limited; only
// where a reporter is installed; on a terminal or on request.
#include <gtest/gtest.h>

#include "support/progress.h"

namespace kiln::progress {
namespace {

struct Fake {
  double now = 0;
  std::vector<std::string> lines;
  Reporter reporter(double delay, double interval) {
    return Reporter([this](const std::string &l) { lines.push_back(l); }, delay, interval,
                    [this] { return now; });
  }
};

TEST(Progress, NothingInTheFirstSecondsThenAtMostOneLinePerInterval) {
  Fake f;
  Reporter r = f.reporter(3, 3);
  r.report("compiling kernels: 1 of 9");
  f.now = 2.9;
  r.report("compiling kernels: 2 of 9");
  EXPECT_TRUE(f.lines.empty()); // a quick step prints nothing
  f.now = 3.2;
  r.report("compiling kernels: 3 of 9");
  f.now = 5;
  r.report("compiling kernels: 4 of 9");
  f.now = 6.4;
  r.report("compiling kernels: 5 of 9");
  EXPECT_EQ(f.lines, (std::vector<std::string>{"kiln: compiling kernels: 3 of 9 (3 s)",
                                               "kiln: compiling kernels: 5 of 9 (6 s)"}));
}

TEST(Progress, ReportGoesToTheInstalledReporterOnly) {
  Fake f;
  Reporter r = f.reporter(0, 0);
  report("before");
  {
    Scope scope(r);
    report("planning layouts: 4 planned");
  }
  report("after");
  EXPECT_EQ(f.lines, (std::vector<std::string>{"kiln: planning layouts: 4 planned (0 s)"}));
}

TEST(Progress, ShownOnATerminalOrWhenAskedNeverOnAPipeByDefault) {
  EXPECT_EQ(stderrReporter(nullptr, false), nullptr);
  EXPECT_EQ(stderrReporter("auto", false), nullptr);
  EXPECT_NE(stderrReporter(nullptr, true), nullptr);
  EXPECT_NE(stderrReporter("always", false), nullptr);
  EXPECT_EQ(stderrReporter("never", true), nullptr);
  std::string warning;
  EXPECT_EQ(stderrReporter("loud", false, &warning), nullptr);
  EXPECT_NE(warning.find("KILN_PROGRESS='loud'"), std::string::npos) << warning;
}

} // namespace
} // namespace kiln::progress
