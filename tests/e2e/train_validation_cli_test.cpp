// kiln train --eval-data: the held-out loss on every layout (data, tensor
// and pipeline parallel, ZeRO, LoRA, MPI) equals one device's within 1e-5;
// validating changes no training result, bit for bit, and a resumed run
// validates as the unbroken one did; the text log, --log-json, the trace
// and kiln report carry it.
#include <cmath>

#include "tests/e2e/train_fixture.h"

namespace kiln::testing {
namespace {

using json = nlohmann::json;

class ValidationCli : public TrainCli {
protected:
  void SetUp() override {
    TrainCli::SetUp();
    ASSERT_EQ(run("make-inputs " + kTiny + " --tokens 2000 --seed 7 -o held.bin").exit_code, 0);
  }

  // The validation losses of a run's --log-json file, by step.
  std::map<int64_t, double> validations(const std::string &log) const {
    std::map<int64_t, double> out;
    for (const json &line : logLines(log))
      if (line.contains("eval_loss"))
        out[line["step"].get<int64_t>()] = line["eval_loss"].get<double>();
    return out;
  }

  static constexpr const char *kEval = " --eval-data held.bin --eval-every 2 --eval-tokens 512 ";
};

TEST_F(ValidationCli, EveryLayoutValidatesAsOneDevice) {
  for (const std::string lora : {"", "--lora-rank 4 "}) {
    const std::string run_flags = "--steps 4 " + lora + kEval;
    Result one = run(train(run_flags + "--devices 1 --log-json one.jsonl"));
    ASSERT_EQ(one.exit_code, 0) << one.err;
    const std::map<int64_t, double> want = validations("one.jsonl");
    ASSERT_EQ(want.size(), 2u) << "steps 2 and 4";
    for (const auto &[step, loss] : want)
      EXPECT_TRUE(std::isfinite(loss)) << step;
    EXPECT_NE(one.out.find("validation at step 2: loss "), std::string::npos) << one.out;
    EXPECT_NE(one.out.find("(512 tokens in 32 windows"), std::string::npos) << one.out;
    for (const std::string layout :
         {"--devices 2 --dp 2", "--devices 2 --tp 2", "--devices 2 --pp 2 --micro-batches 2",
          "--devices 2 --zero 1", "--devices 2 --zero 3",
          "--devices 8 --dp 2 --tp 2 --pp 2 --micro-batches 2"}) {
      SCOPED_TRACE(lora + layout);
      Result r = run(train(run_flags + layout + " --log-json layout.jsonl"));
      ASSERT_EQ(r.exit_code, 0) << r.err;
      const std::map<int64_t, double> got = validations("layout.jsonl");
      ASSERT_EQ(got.size(), want.size());
      for (const auto &[step, loss] : want)
        EXPECT_NEAR(got.at(step), loss, 1e-5) << "step " << step;
      expectMeasuredPeakIsPlan(r.out, layout);
    }
  }
}

// The same runs with and without validation: the same losses, gradient
// norms, loss scales and final weights, bit for bit; in f16 with dynamic
// loss scaling too, whose first steps overflow (validation keeps its own
// float status).
TEST_F(ValidationCli, ValidatingChangesNoTrainingResult) {
  for (const std::string layout : {"--devices 2 --zero 2", "--devices 2 --pp 2 --micro-batches 2",
                                   "--devices 2 --tp 2 --dtype f16 --loss-scale dynamic"}) {
    SCOPED_TRACE(layout);
    const std::string flags = "--steps 6 " + layout;
    ASSERT_EQ(run(train(flags + " --log-json plain.jsonl --checkpoint-dir plain")).exit_code, 0);
    Result with = run(train(flags + kEval + "--log-json eval.jsonl --checkpoint-dir eval"));
    ASSERT_EQ(with.exit_code, 0) << with.err;
    const std::vector<json> a = logLines("plain.jsonl"), b = logLines("eval.jsonl");
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      for (const char *key : {"loss", "grad_norm", "loss_scale", "overflow"})
        EXPECT_EQ(b[i][key], a[i][key]) << key << ", step " << i + 1;
    EXPECT_EQ(validations("eval.jsonl").size(), 3u);
    expectSameTensors("plain/step-000006.safetensors", "eval/step-000006.safetensors");
    fs::remove_all(dir_ / "plain");
    fs::remove_all(dir_ / "eval");
  }
}

// Killed after its step-4 checkpoint (here: the later one removed) and
// resumed, a run validates at steps 6 and 8 as the unbroken one did.
TEST_F(ValidationCli, AResumedRunValidatesAsTheUnbrokenOne) {
  const std::string flags =
      "--devices 2 --zero 1 --steps 8 --checkpoint-every 4" + std::string(kEval);
  ASSERT_EQ(run(train(flags + "--checkpoint-dir whole --log-json whole.jsonl")).exit_code, 0);
  fs::create_directories(dir_ / "resumed");
  fs::copy_file(dir_ / "whole" / "step-000004.safetensors",
                dir_ / "resumed" / "step-000004.safetensors");
  Result resumed = run(train(flags + "--checkpoint-dir resumed --resume --log-json resumed.jsonl"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const std::map<int64_t, double> want = validations("whole.jsonl"),
                                  got = validations("resumed.jsonl");
  ASSERT_EQ(want.size(), 4u);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got.at(6), want.at(6));
  EXPECT_EQ(got.at(8), want.at(8));
  expectSameTensors("whole/step-000008.safetensors", "resumed/step-000008.safetensors");
}

// Two MPI processes (replicas apart; a pipeline's stages apart, its
// activations sent between them) validate as one process does, bit for bit.
TEST_F(ValidationCli, MpiProcessesValidateAsOneProcess) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "OpenMPI's mpirun is not installed";
  for (const std::string layout :
       {"--devices 4 --dp 2 --tp 2", "--devices 2 --pp 2 --micro-batches 2"}) {
    SCOPED_TRACE(layout);
    const std::string flags = "--steps 4 " + layout + kEval;
    ASSERT_EQ(run(train(flags + "--log-json one.jsonl")).exit_code, 0);
    const std::string per_process = layout.find("pp") == std::string::npos ? "2" : "1";
    Result mpi =
        shell("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 "
              "mpirun --oversubscribe -np 2 " +
              kiln_ + " " +
              train(flags + "--devices-per-process " + per_process + " --log-json mpi.jsonl"));
    if (mpi.exit_code != 0 && mpi.err.find("built without MPI") != std::string::npos)
      GTEST_SKIP() << "kiln was built without MPI";
    ASSERT_EQ(mpi.exit_code, 0) << mpi.err;
    const std::map<int64_t, double> want = validations("one.jsonl"), got = validations("mpi.jsonl");
    ASSERT_EQ(want.size(), 2u);
    EXPECT_EQ(got, want);
    // One process prints: the banner, 4 steps, 2 validations, the peak.
    EXPECT_EQ(std::count(mpi.out.begin(), mpi.out.end(), '\n'), 8) << mpi.out;
  }
}

// The trace has a validation event on every device; kiln report draws the
// held-out loss beside the training loss and the perplexity in its own chart.
TEST_F(ValidationCli, TheTraceAndTheReportShowIt) {
  Result r = run(train("--steps 4 --devices 2 --dp 2" + std::string(kEval) +
                       "--trace trace.json --log-json log.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json trace = json::parse(slurp(path("trace.json")));
  std::set<int64_t> devices;
  for (const json &e : trace["traceEvents"])
    if (e.value("name", "") == "validation")
      devices.insert(e["tid"].get<int64_t>());
  EXPECT_EQ(devices.size(), 2u) << "a validation event on each device's track";
  const json last = logLines("log.jsonl").back();
  EXPECT_DOUBLE_EQ(last["eval_perplexity"].get<double>(),
                   std::exp(last["eval_loss"].get<double>()));
  EXPECT_EQ(last["validation"]["windows"], 32);
  Result report = run("report log.jsonl -o report.html");
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const std::string html = slurp(path("report.html"));
  EXPECT_NE(html.find("eval_loss"), std::string::npos);
  EXPECT_NE(html.find("eval_perplexity"), std::string::npos);
}

} // namespace
} // namespace kiln::testing
