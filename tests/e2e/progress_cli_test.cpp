// Progress lines from the real binary: on stderr when asked
// (KILN_PROGRESS=always), never on a pipe by default, never on stdout.
#include <gtest/gtest.h>

#include "tests/e2e/cli_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;

class ProgressCli : public Cli {};

TEST_F(ProgressCli, PlanSaysHowFarItGotWhenAskedAndNothingOnAPipe) {
  const std::string plan = "plan " + kTiny + " --global-batch 8";
  Result quiet = run(plan);
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err.find("planning layouts:"), std::string::npos) << quiet.err;

  Result asked = shell("KILN_PROGRESS=always " + std::string(KILN_CLI) + " " + plan);
  ASSERT_EQ(asked.exit_code, 0) << asked.err;
  EXPECT_NE(asked.err.find("kiln: planning layouts: 1 planned"), std::string::npos) << asked.err;
  EXPECT_EQ(asked.out.find("planning layouts:"), std::string::npos)
      << asked.out; // stdout: the plan

  Result compiled = shell("KILN_PROGRESS=always " + std::string(KILN_CLI) + " compile " + kTiny +
                          " --seq 8 --cache-dir fresh");
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  EXPECT_NE(compiled.err.find("kiln: compiling kernels: 0 of "), std::string::npos) << compiled.err;
}

} // namespace
} // namespace kiln
