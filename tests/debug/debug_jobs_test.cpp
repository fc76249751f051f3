// The debug commands' work without the CLI: one path from a job to a
// compiled run, a comparison of the compiled kernels with the interpreter,
// a bisection that names the rule behind a kernel the target cannot build,
// and an overflow located and fixed on a model whose attention overflows
// in f16.
#include <filesystem>
#include <unistd.h>

#include <gtest/gtest.h>

#include "compiler/frontend/decoder_config.h"
#include "compiler/frontend/decoder_init.h"
#include "debug/bisect_job.h"
#include "debug/compare_job.h"
#include "debug/job_run.h"
#include "debug/overflow_job.h"
#include "debug/reduce_job.h"
#include "formats/safetensors.h"

namespace kiln::debug {
namespace {

namespace fs = std::filesystem;

const std::string kTiny = KILN_SOURCE_DIR "/examples/qwen-tiny/config.json";
const std::string kOverflow = KILN_SOURCE_DIR "/examples/overflow/config.json";

fs::path scratch(const std::string &name) {
  fs::path dir = fs::temp_directory_path() / ("kiln_debug_jobs_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

// Writes `config`'s initial weights (the tensors whose names contain
// `scaled` multiplied by `scale`) and a batch of 2 x `seq` token ids; the
// run request that reads them, with training.
driver::ReferenceRunRequest modelRun(const std::string &config_path, int64_t seq,
                                     const std::string &scaled = "", float scale = 1) {
  auto config = frontend::readDecoderConfig(config_path);
  EXPECT_TRUE(config.isOk()) << config.message();
  const std::string stem = fs::path(config_path).parent_path().filename().string();
  SafetensorsFile weights{frontend::initDecoderWeights(*config, 0), {}};
  for (auto &[name, t] : weights.tensors)
    if (!scaled.empty() && name.find(scaled) != std::string::npos)
      for (int64_t i = 0; i < t.numElements(); ++i)
        t.setFloat(i, t.getFloat(i) * scale, OverflowMode::InfNan);
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 2 * seq; ++i)
    ids.push_back((i * 7 + 3) % config->vocab_size);
  SafetensorsFile inputs{{{"input_ids", Tensor::fromInts(DType::I64, Shape({2, seq}), ids)}}, {}};
  driver::ReferenceRunRequest request;
  request.model = config_path;
  request.weights_path = scratch(stem + ".weights.st").string();
  request.inputs_path = scratch(stem + ".inputs.st").string();
  request.training = true;
  EXPECT_TRUE(writeSafetensors(request.weights_path, weights).isOk());
  EXPECT_TRUE(writeSafetensors(request.inputs_path, inputs).isOk());
  return request;
}

driver::ResolvedJob jobOf(driver::JobSettings flags, std::optional<driver::JobSettings> file = {}) {
  auto job = driver::resolveJob(file, flags, driver::kDefaultModelDType);
  EXPECT_TRUE(job.isOk()) << job.message();
  return std::move(*job);
}

driver::KernelSettings cacheIn(const std::string &name) {
  driver::KernelSettings cache;
  cache.dir = scratch(name).string();
  cache.dump_dir = scratch(name + "-dump").string();
  return cache;
}

TEST(CompileModelRun, PreparesTheGraphEditsItThenCompilesItsKernels) {
  const driver::ReferenceRunRequest request = modelRun(kTiny, 8);
  const driver::ResolvedJob job = jobOf({});
  size_t nodes_seen = 0;
  auto run = compileModelRun(request, job, cacheIn("cache"), [&](Graph &graph) {
    nodes_seen = graph.numNodes();
    return Status::ok();
  });
  ASSERT_TRUE(run.isOk()) << run.message();
  EXPECT_EQ(nodes_seen, run->run.graph.numNodes()) << "the edit sees the graph compiled";
  EXPECT_GT(nodes_seen, 0u);
  EXPECT_TRUE(run->run.inputs.count("input_ids"));

  auto refused = compileModelRun(request, job, cacheIn("cache"),
                                 [](Graph &) { return Status(Error("no edit today")); });
  ASSERT_FALSE(refused.isOk());
  EXPECT_EQ(refused.message(), "no edit today") << "the edit's error ends the run";
}

TEST(CompareJob, TheCompiledKernelsFollowTheInterpreterAndDifferAtToleranceZero) {
  driver::JobSettings f16;
  f16.dtype = DType::F16;
  const driver::ResolvedJob job = jobOf(f16);
  CompareJobRequest request;
  request.run = modelRun(kTiny, 8);
  request.cache = cacheIn("cache");
  auto close = compareJob(request, job);
  ASSERT_TRUE(close.isOk()) << close.message();
  EXPECT_EQ(close->tolerance, compareTolerance(DType::F16));
  EXPECT_FALSE(close->first_divergence.has_value()) << close->toText();
  EXPECT_GT(close->values.size(), 100u);
  request.tolerance = 0;
  request.against = "unfused";
  auto exact = compareJob(request, job);
  ASSERT_TRUE(exact.isOk()) << exact.message();
  EXPECT_EQ(exact->against, "unfused");
  EXPECT_TRUE(exact->first_divergence.has_value())
      << "f32 intermediates in fused groups change some f16 results in the last bit";
}

TEST(BisectJob, NamesTheRuleThatFormedTheKernelTheTargetCannotBuild) {
  auto file = driver::readJobFile(KILN_SOURCE_DIR "/examples/debug/job.json");
  ASSERT_TRUE(file.isOk()) << file.message();
  BisectJobRequest request;
  request.model.model = KILN_SOURCE_DIR "/examples/debug/graph.json";
  request.model.training = true;
  request.cache = cacheIn("cache");
  auto result = bisectJob(request, jobOf({}, *file));
  ASSERT_TRUE(result.isOk()) << result.message();
  EXPECT_TRUE(result->job_fails);
  EXPECT_EQ(result->culprit, "RowL2NormFusionRule");
  EXPECT_EQ(result->application, 1);
  EXPECT_EQ(result->group_name, "fused.normed");
  EXPECT_EQ(result->disableFlag(), "--disable-pass RowL2NormFusionRule");
}

TEST(BisectJob, AnOverflowWithEveryPassOffIsNoPasssDoing) {
  // Attention weights 2000 times too large overflow the f16 scores unless
  // AttentionFp32CastPass keeps them in f32; switched off by hand, the run
  // with every pass off fails too, and the reference is force_fp32's.
  driver::JobSettings flags;
  flags.precision_mode = passes::PrecisionMode::AllowMixPrecisionFp16;
  // Fused attention keeps its scores in f32 too: off, as
  // AttentionFp32CastPass is.
  flags.disable_passes = {"AttentionFp32CastPass", "FlashAttentionFusionPass"};
  const driver::ReferenceRunRequest run = modelRun(kOverflow, 16, "attn.c_attn.weight", 2000);
  BisectJobRequest request;
  request.model.model = kOverflow;
  request.model.training = true;
  request.model.batch = 2;
  request.model.seq = 16;
  request.cache = cacheIn("cache");
  request.accuracy = true;
  request.weights = run.weights_path;
  request.inputs = run.inputs_path;
  auto result = bisectJob(request, jobOf(flags));
  ASSERT_TRUE(result.isOk()) << result.message();
  EXPECT_TRUE(result->job_fails) << result->toText();
  EXPECT_TRUE(result->fails_without_passes) << result->toText();
  EXPECT_TRUE(result->culprit.empty()) << result->toText();
  EXPECT_EQ(result->reference.rfind("force_fp32", 0), 0u) << result->reference;
  EXPECT_NE(result->next_step.find("kiln debug overflow"), std::string::npos) << result->toText();
}

TEST(LocateJobOverflow, NamesTheAttentionScoresAndVerifiesAFix) {
  driver::JobSettings flags;
  flags.precision_mode = passes::PrecisionMode::AllowMixPrecisionFp16;
  // Fused attention keeps its scores in f32 too: off, as
  // AttentionFp32CastPass is.
  flags.disable_passes = {"AttentionFp32CastPass", "FlashAttentionFusionPass"};
  OverflowJobRequest request;
  request.run = modelRun(kOverflow, 16, "attn.c_attn.weight", 2000);
  request.cache = cacheIn("cache");
  request.dump_dir = scratch("overflow-dump").string();
  auto report = locateJobOverflow(request, jobOf(flags));
  ASSERT_TRUE(report.isOk()) << report.message();
  ASSERT_TRUE(report->found);
  EXPECT_EQ(report->op_name, "transformer.h.0.attn.scores");
  ASSERT_FALSE(report->fixes.empty());
  EXPECT_TRUE(report->fixes[0].verified) << report->toText();
  EXPECT_NE(report->reference.find("force_fp32"), std::string::npos) << report->reference;

  request.verify = false;
  auto unverified = locateJobOverflow(request, jobOf(flags));
  ASSERT_TRUE(unverified.isOk()) << unverified.message();
  EXPECT_TRUE(unverified->fixes.empty()) << "only suggestions without verifying";
  EXPECT_FALSE(unverified->suggestions.empty());
}

TEST(ReduceJob, ShrinksTheFailingKernelToAReproThatFailsTheSameWay) {
  auto file = driver::readJobFile(KILN_SOURCE_DIR "/examples/debug/job.json");
  ASSERT_TRUE(file.isOk()) << file.message();
  const driver::ResolvedJob job = jobOf({}, *file);
  driver::ModelRequest model;
  model.model = KILN_SOURCE_DIR "/examples/debug/graph.json";
  model.training = true;
  const fs::path out = scratch("repro");
  fs::remove_all(out);
  auto reduced = reduceJob(model, job, out.string());
  ASSERT_TRUE(reduced.isOk()) << reduced.message();
  EXPECT_EQ(reduced->signature.code, "E40001");
  EXPECT_EQ(reduced->signature.formed_by, "RowL2NormFusionRule");
  EXPECT_EQ(reduced->reduction.rfind("49 nodes to ", 0), 0u) << reduced->reduction;
  for (const char *name : {"graph.json", "job.json", "README.md"})
    EXPECT_TRUE(fs::exists(out / name)) << name;

  // Without the rule every kernel fits: nothing to reduce.
  driver::JobSettings off;
  off.disable_passes = {"RowL2NormFusionRule"};
  auto fits = reduceJob(model, jobOf(off, *file), scratch("no-repro").string());
  ASSERT_FALSE(fits.isOk());
  EXPECT_NE(fits.message().find("every kernel of the job fits the target"), std::string::npos)
      << fits.message();
}

} // namespace
} // namespace kiln::debug
