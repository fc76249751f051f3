// The pass pipeline is described once (passes/pipeline.cpp): every built-in
// pass is in the table with its own group, the table reads top to bottom in
// the order the registry runs, and docs/design.md shows that same order.
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "passes/pass_registry.h"
#include "passes/pipeline.h"

namespace kiln::passes {
namespace {

std::string pipelineLine(const PipelineEntry &e) {
  return std::string(passGroupName(e.group)) + " " + std::string(e.pass) + " " +
         std::to_string(e.priority);
}

TEST(Pipeline, EveryBuiltinPassIsInTheTableOnceWithItsGroup) {
  std::set<std::string> listed;
  for (const PipelineEntry &e : builtinPipeline()) {
    EXPECT_TRUE(listed.insert(std::string(e.pass)).second) << e.pass << " is listed twice";
    const Pass *pass = PassRegistry::builtin().find(e.pass);
    ASSERT_NE(pass, nullptr) << e.pass << " is in the pipeline but not registered";
    EXPECT_EQ(pass->info().group, e.group) << e.pass;
  }
  for (const Pass *p : PassRegistry::builtin().ordered())
    EXPECT_TRUE(listed.count(p->info().name)) << p->info().name << " is missing from pipeline.cpp";
}

TEST(Pipeline, TheTableReadsInRunOrder) {
  std::vector<std::string> table, run;
  for (const PipelineEntry &e : builtinPipeline())
    table.emplace_back(e.pass);
  for (const Pass *p : PassRegistry::builtin().ordered())
    run.push_back(p->info().name);
  EXPECT_EQ(table, run);
}

// docs/design.md's "The pass pipeline" block: one "Group Pass priority" line
// per pass, the table's rows in its order.
TEST(Pipeline, DesignDocShowsTheTable) {
  std::ifstream in(std::string(KILN_SOURCE_DIR) + "/docs/design.md");
  ASSERT_TRUE(in) << "cannot read docs/design.md";
  std::string line;
  while (std::getline(in, line) && line != "## The pass pipeline") {
  }
  while (std::getline(in, line) && line != "```") {
  }
  std::vector<std::string> shown;
  while (std::getline(in, line) && line != "```") {
    std::istringstream words(line);
    std::string group, pass, priority;
    words >> group >> pass >> priority;
    shown.push_back(group + " " + pass + " " + priority);
  }
  std::vector<std::string> want;
  for (const PipelineEntry &e : builtinPipeline())
    want.push_back(pipelineLine(e));
  EXPECT_EQ(shown, want) << "docs/design.md's pass pipeline differs from passes/pipeline.cpp";
}

} // namespace
} // namespace kiln::passes
