// What `kiln compile` runs, without the CLI: the lengths checked before
// anything compiles, one artifact bucket (and one report) per length in the
// order given, a failed compile's report with the error and its code, and
// the signed artifact's count of what it holds.
#include "compiler/driver/compile_run.h"

#include <filesystem>
#include <unistd.h>

#include <gtest/gtest.h>

namespace kiln::driver {
namespace {

namespace fs = std::filesystem;

const std::string kTiny = std::string(KILN_SOURCE_DIR) + "/examples/qwen-tiny/config.json";

ResolvedJob job() {
  auto resolved = resolveJob(std::nullopt, JobSettings{}, kDefaultModelDType);
  EXPECT_TRUE(resolved.isOk()) << resolved.message();
  return std::move(resolved).value();
}

CompileRunRequest request(std::vector<int64_t> seqs, const std::string &model = kTiny) {
  CompileRunRequest r;
  r.program.model = {model, false, 1, 0};
  r.program.kernels.dir =
      (fs::temp_directory_path() / ("kiln_compile_run_" + std::to_string(::getpid()))).string();
  r.program.for_artifact = true;
  r.seqs = std::move(seqs);
  r.report = true;
  r.artifact = "tiny.kiln";
  return r;
}

TEST(CompileRun, TheLengthsAreCheckedBeforeAnythingCompiles) {
  EXPECT_TRUE(checkCompileLengths({8, 16}, /*to_artifact=*/true, false, "a.kiln").isOk());
  EXPECT_TRUE(checkCompileLengths({}, false, true, "").isOk());
  EXPECT_FALSE(checkCompileLengths({8, 16, 8}, true, false, "a.kiln").isOk()) << "8 twice";
  EXPECT_FALSE(checkCompileLengths({8, 16}, false, false, "g.json").isOk())
      << "several lengths only into an artifact";
  EXPECT_FALSE(checkCompileLengths({8}, true, /*passes_only=*/true, "a.kiln").isOk())
      << "an artifact holds kernels";
}

TEST(CompileRun, EachLengthIsABucketWithItsReportInTheOrderGiven) {
  CompileRun run;
  std::vector<int64_t> seen;
  Status compiled =
      compileRun(request({16, 8}), job(), run, [&](const ProgramCompile &c, int64_t seq) {
        EXPECT_TRUE(c.has_kernels);
        seen.push_back(seq);
        return Status::ok();
      });
  ASSERT_TRUE(compiled.isOk()) << compiled.message();
  EXPECT_EQ(seen, (std::vector<int64_t>{16, 8}));
  ASSERT_EQ(run.buckets.size(), 2u);
  EXPECT_EQ(run.buckets[0].seq, 16);
  EXPECT_EQ(run.buckets[1].seq, 8);
  ASSERT_TRUE(run.manifest.has_value());
  ASSERT_TRUE(run.report.contains("buckets"));
  ASSERT_EQ(run.report["buckets"].size(), 2u);
  EXPECT_EQ(run.report["buckets"][0]["seq"], 16);
  EXPECT_EQ(run.report["buckets"][1]["seq"], 8);

  int64_t kernels = run.buckets[0].kernels + run.buckets[1].kernels;
  auto signed_artifact = signArtifact(*run.manifest, std::move(run.buckets), "tiny.kiln");
  ASSERT_TRUE(signed_artifact.isOk()) << signed_artifact.message();
  EXPECT_EQ(signed_artifact->buckets, 2u);
  EXPECT_EQ(signed_artifact->seqs, (std::vector<int64_t>{8, 16})) << "ascending";
  EXPECT_EQ(static_cast<int64_t>(signed_artifact->kernels), kernels);
  EXPECT_GT(signed_artifact->objects, 0u);
  EXPECT_FALSE(signed_artifact->bytes.empty());
  EXPECT_FALSE(signed_artifact->key_fingerprint.empty());
}

TEST(CompileRun, OneLengthsReportIsTheReportItself) {
  CompileRun run;
  CompileRunRequest r = request({8});
  r.program.for_artifact = false;
  ASSERT_TRUE(compileRun(r, job(), run, [](const ProgramCompile &, int64_t) {
                return Status::ok();
              }).isOk());
  EXPECT_FALSE(run.report.contains("buckets"));
  EXPECT_FALSE(run.report.contains("seq"));
  EXPECT_TRUE(run.buckets.empty()) << "no artifact asked for";
  EXPECT_FALSE(run.manifest.has_value());
}

TEST(CompileRun, AFailedCompileLeavesItsReportWithTheError) {
  CompileRun run;
  int called = 0;
  Status failed = compileRun(request({8, 16}, "missing/config.json"), job(), run,
                             [&](const ProgramCompile &, int64_t) {
                               ++called;
                               return Status::ok();
                             });
  ASSERT_FALSE(failed.isOk());
  EXPECT_EQ(called, 0);
  ASSERT_TRUE(run.report.contains("error"));
  EXPECT_EQ(run.report["error"]["message"], failed.message());
  ASSERT_EQ(run.report["buckets"].size(), 1u) << "what it got to";
  EXPECT_EQ(run.report["buckets"][0]["seq"], 8);
}

TEST(CompileRun, AnErrorsCodeAndLocationGoApartIntoTheReport) {
  const Error e = Error::at("job.json: $.passes", "unknown pass").withCode("E10001");
  const nlohmann::json report = reportWithError(nullptr, e);
  EXPECT_EQ(report["error"]["code"], "E10001");
  EXPECT_EQ(report["error"]["location"], "job.json: $.passes");
  EXPECT_EQ(report["error"]["message"], e.message());
  const nlohmann::json plain = reportWithError({{"passes", 3}}, Error("no"));
  EXPECT_EQ(plain["passes"], 3);
  EXPECT_FALSE(plain["error"].contains("code"));
  EXPECT_FALSE(plain["error"].contains("location"));
}

} // namespace
} // namespace kiln::driver
