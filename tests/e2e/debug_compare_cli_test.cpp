// kiln debug compare: the compiled kernels agree with the interpreter and the
// fused graph with the unfused one within tolerance, and at tolerance 0 the
// tool names the first value that differs.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/cli_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using nlohmann::json;

class DebugCompare : public Cli {
protected:
  void SetUp() override {
    Cli::SetUp();
    ASSERT_EQ(run("init " + kTiny + " -o " + path("w.st")).exit_code, 0);
    ASSERT_EQ(run("make-inputs " + kTiny + " --batch 2 --seq 8 -o " + path("i.st")).exit_code, 0);
  }
  json compare(const std::string &flags) {
    Result r = run("debug compare " + kTiny + " --weights " + path("w.st") + " --inputs " +
                   path("i.st") + " --training --format json " + flags);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? json::parse(r.out) : json();
  }
};

TEST_F(DebugCompare, CompiledAgreesWithTheReferenceWithinTolerance) {
  for (const char *dtype : {"f32", "f16", "bf16"}) {
    json report = compare(std::string("--dtype ") + dtype);
    EXPECT_TRUE(report["first_divergence"].is_null())
        << dtype << ": " << report["first_divergence"];
    EXPECT_GT(report["values"].size(), 100u);
  }
}

TEST_F(DebugCompare, ToleranceZeroNamesTheFirstDifference) {
  json report = compare("--dtype f16 --tol 0");
  ASSERT_FALSE(report["first_divergence"].is_null());
  const std::string first = report["first_divergence"];
  bool found = false;
  for (const json &v : report["values"])
    if (v["name"] == first) {
      found = true;
      EXPECT_GT(v["outside"].get<int64_t>(), 0);
    }
  EXPECT_TRUE(found);
}

TEST_F(DebugCompare, FusedAgainstUnfused) {
  json close = compare("--dtype f16 --against unfused");
  EXPECT_EQ(close["against"], "unfused");
  EXPECT_TRUE(close["first_divergence"].is_null()) << close["first_divergence"];
  // f32 intermediates in fused groups make some f16 results differ in the last bit.
  json exact = compare("--dtype f16 --against unfused --tol 0");
  EXPECT_FALSE(exact["first_divergence"].is_null());
}

TEST_F(DebugCompare, BadAgainstIsAnError) {
  Result r = run("debug compare " + kTiny + " --weights " + path("w.st") + " --inputs " +
                 path("i.st") + " --against nothing");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--against"), std::string::npos) << r.err;
}

} // namespace
} // namespace kiln
