// examples/debug end to end: a custom op and a fusion rule whose fused
// kernel cannot fit ascend910b's Unified Buffer. The compile fails with the
// coded error and an IR dump; bisect names the rule; reduce writes a repro
// of at most 10 nodes that fails the same way; with fallback the job
// compiles, runs and agrees with the reference interpreter.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "formats/safetensors.h"
#include "ir/tensor_compare.h"
#include "tests/e2e/cli_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using nlohmann::json;

const std::string kExample = kSource + "/examples/debug";
const std::string kJob = kExample + "/graph.json --job " + kExample + "/job.json --training";

class DebugExample : public Cli {};

TEST_F(DebugExample, CompileFailsWithTheCodedErrorAndAnIrDump) {
  Result r = run("compile " + kJob + " --report " + path("report.json"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("E40001 kernel 'fused.normed' (row_l2_norm, formed by RowL2NormFusionRule)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("ascend910b has 192.0 KiB"), std::string::npos) << r.err;
  json report = json::parse(slurp(path("report.json")));
  ASSERT_EQ(report["errors"].size(), 1u) << report.dump(2);
  const json &error = report["errors"][0];
  EXPECT_EQ(error["formed_by"], "RowL2NormFusionRule");
  const std::string dump = error["ir_dump"];
  EXPECT_EQ(dump.rfind("kiln_dump/fused.normed.", 0), 0u) << dump;
  EXPECT_NE(r.err.find("kernel IR: " + dump), std::string::npos) << r.err;
  const std::string text = slurp(path(dump));
  EXPECT_NE(text.find("# E40001: needs"), std::string::npos) << text;
  EXPECT_NE(text.find("= RowSumSquares(%act) in fused.normed"), std::string::npos) << text;
  EXPECT_NE(text.find("## kernel program"), std::string::npos) << text;
  EXPECT_NE(text.find("stage energy f32[4] materialized = sum("), std::string::npos) << text;

  Result none = run("compile " + kJob + " --kernel-dump-dir ''");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_EQ(none.err.find("kernel IR:"), std::string::npos) << none.err;
}

TEST_F(DebugExample, BisectNamesTheRule) {
  Result r = run("debug bisect " + kJob + " --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = json::parse(r.out);
  EXPECT_EQ(report["culprit"], "RowL2NormFusionRule") << report.dump(2);
  EXPECT_EQ(report["fused_group"], "fused.normed");
  EXPECT_EQ(report["flag"], "--disable-pass RowL2NormFusionRule");
}

TEST_F(DebugExample, ReduceWritesARepro) {
  Result r = run("debug reduce " + kJob + " -o repro");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("keeping E40001 in a row_l2_norm kernel formed by RowL2NormFusionRule"),
            std::string::npos)
      << r.out;
  json graph = json::parse(slurp(path("repro/graph.json")));
  EXPECT_LE(graph["nodes"].size(), 10u);
  EXPECT_GE(graph["nodes"].size(), 3u) << "the rule's three ops";
  json job = json::parse(slurp(path("repro/job.json")));
  EXPECT_EQ(job["custom_ops"], json::array({"custom_ops/0"}));
  EXPECT_EQ(job["fusion_rules"], json::array({"fusion_rules/0"}));
  EXPECT_NE(slurp(path("repro/README.md")).find("kiln compile graph.json --job job.json"),
            std::string::npos);

  // The repro stands alone: moved elsewhere, run as its README says.
  fs::rename(path("repro"), path("moved"));
  Result again = run("compile moved/graph.json --job moved/job.json");
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("E40001"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("formed by RowL2NormFusionRule"), std::string::npos) << again.err;
}

TEST_F(DebugExample, ReduceNeedsACompileThatFails) {
  Result r = run("debug reduce " + kTiny + " --seq 8 -o repro");
  expectRunError(r, {"every kernel of the job fits the target"});
  EXPECT_FALSE(fs::exists(path("repro")));
}

TEST_F(DebugExample, FallbackCompilesRunsAndAgreesWithTheReference) {
  const std::string model = kExample + "/graph.json --job " + kExample + "/job.json";
  ASSERT_EQ(run("init " + model + " -o w.st").exit_code, 0);
  ASSERT_EQ(run("make-inputs " + model + " -o in.st").exit_code, 0);
  const std::string common = "run " + kJob + " --weights w.st --inputs in.st";
  Result fallback = run(common + " --on-compile-error fallback --outputs got.st");
  ASSERT_EQ(fallback.exit_code, 0) << fallback.err;
  EXPECT_NE(fallback.err.find("split into 3 single-op kernels"), std::string::npos) << fallback.err;
  ASSERT_EQ(run(common + " --reference --outputs want.st").exit_code, 0);

  auto got = readSafetensors(path("got.st"));
  auto want = readSafetensors(path("want.st"));
  ASSERT_TRUE(got.isOk() && want.isOk());
  ASSERT_EQ(got->tensors.size(), want->tensors.size());
  EXPECT_TRUE(want->tensors.count("grad.gain")) << "the backward ran";
  for (const auto &[name, t] : want->tensors)
    EXPECT_EQ(firstMismatch(got->tensors.at(name), t, 1e-4, 1e-5), "") << name;
}

} // namespace
} // namespace kiln
