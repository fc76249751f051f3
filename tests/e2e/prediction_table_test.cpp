// docs/training.md's table of predictions against published runs: every
// row's kiln flags, planned with --compile-only on Qwen-14B and 8 x
// ascend910b, print the prediction the table states (and the published
// figure and the error it states follow from it), so the docs cannot drift
// from the cost model.
#include <cmath>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/e2e/cli_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;

struct Row {
  std::string flags;
  double published = 0, predicted = 0, error = 0; // error in percent
};

// The rows of the table that follows "**Against the published runs.**":
// | run | published | `flags` | predicted | off by | why |
std::vector<Row> tableRows() {
  const std::string doc = slurp(kSource + "/docs/training.md");
  const size_t at = doc.find("**Against the published runs.**");
  EXPECT_NE(at, std::string::npos) << "docs/training.md lost its prediction table";
  std::vector<Row> rows;
  if (at == std::string::npos)
    return rows;
  std::istringstream in(doc.substr(at));
  std::string line;
  bool in_table = false;
  const std::regex row(R"(^\| [^|]+ \| ([0-9]+) \| `([^`]+)` \| ([0-9]+) \| ([+-]?[0-9]+) % \|)");
  while (std::getline(in, line)) {
    if (line.rfind("|", 0) != 0) {
      if (in_table)
        break; // the table ended
      continue;
    }
    in_table = true;
    std::smatch m;
    if (!std::regex_search(line, m, row))
      continue; // the header and its rule
    rows.push_back({m[2], std::stod(m[1]), std::stod(m[3]), std::stod(m[4])});
  }
  return rows;
}

class PredictionTable : public Cli {};

TEST_F(PredictionTable, EveryRowIsTheCostModelsPrediction) {
  const std::vector<Row> rows = tableRows();
  ASSERT_GE(rows.size(), 5u) << "the table's rows no longer parse";
  const std::regex rate("([0-9]+) tokens/s per device");
  for (const Row &r : rows) {
    SCOPED_TRACE(r.flags);
    // Planned as if the device were large enough: the prediction does not
    // depend on the capacity, and a plan that does not fit would go on to
    // plan the switches that would lower it.
    Result out =
        run("train " + k14b +
            " --compile-only --target ascend910b --devices 8 --device-memory 1024GiB " + r.flags);
    ASSERT_EQ(out.exit_code, 0) << out.err << out.out;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(out.out, m, rate)) << out.out;
    EXPECT_EQ(std::stod(m[1]), r.predicted) << out.out;
    EXPECT_EQ(std::lround(100 * (r.predicted - r.published) / r.published), std::lround(r.error))
        << "the error column follows from the prediction and the published figure";
  }
}

} // namespace
} // namespace kiln
