// kiln train / kiln run --profile DIR as a user reads the result: msprof's
// files with msprof's columns, a row per kernel per step and device, the
// fused kernels with the pass that formed them, and durations that add up to
// the step they were measured in.
#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/report/report_inputs.h"
#include "tests/e2e/cli_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;

// The rows of a CSV file as maps from its header's column names.
std::vector<std::map<std::string, std::string>> table(const std::string &text) {
  auto rows = report::csvRows(text);
  std::vector<std::map<std::string, std::string>> out;
  for (size_t r = 1; r < rows.size(); ++r) {
    EXPECT_EQ(rows[r].size(), rows[0].size()) << "row " << r;
    std::map<std::string, std::string> row;
    for (size_t c = 0; c < rows[0].size() && c < rows[r].size(); ++c)
      row[rows[0][c]] = rows[r][c];
    out.push_back(std::move(row));
  }
  return out;
}

class ProfileCli : public Cli {
protected:
  void SetUp() override {
    Cli::SetUp();
    std::string tokens;
    for (int i = 0; i < 4000; ++i) {
      const uint16_t t = static_cast<uint16_t>((i * 7 + 3) % 512);
      tokens.append(reinterpret_cast<const char *>(&t), sizeof t);
    }
    write("train.bin", tokens);
  }
};

TEST_F(ProfileCli, TrainWritesMsprofFilesForEveryStepAndDevice) {
  Result r = run("train " + kTiny +
                 " --data train.bin --batch 4 --seq 16 --steps 3 --devices 2 --profile prof");
  ASSERT_EQ(r.exit_code, 0) << r.err;

  const auto summary = table(slurp(path("prof/op_summary.csv")));
  ASSERT_FALSE(summary.empty());
  for (const char *column :
       {"Step Id", "Device_id", "Op Name", "OP Type", "Task Type", "Task Start Time(us)",
        "Task Duration(us)", "Input Shapes", "Output Shapes", "Data Types", "FLOPs", "Bytes",
        "GFLOP/s", "GB/s", "Roofline %"})
    EXPECT_TRUE(summary.front().count(column)) << column;
  std::map<std::pair<std::string, std::string>, int> kernels; // (step, device) -> rows
  bool matmul = false, fused_name = false;
  for (const auto &row : summary) {
    if (row.at("Task Type") != "HOST")
      ++kernels[{row.at("Step Id"), row.at("Device_id")}];
    if (row.at("Task Type") == "AI_CORE") {
      matmul = true;
      EXPECT_GT(std::stod(row.at("FLOPs")), 0) << row.at("Op Name");
      EXPECT_FALSE(row.at("Input Shapes").empty()) << row.at("Op Name");
    }
    fused_name = fused_name || row.at("Op Name").rfind("fused.transformer.h.", 0) == 0;
  }
  EXPECT_TRUE(matmul) << "matmuls run as cube (AI_CORE) kernels";
  EXPECT_TRUE(fused_name) << "fused kernels carry their scoped names";
  for (const char *step : {"1", "2", "3"})
    for (const char *device : {"0", "1"})
      EXPECT_GT((kernels[{step, device}]), 20) << "step " << step << " device " << device;

  const auto statistic = table(slurp(path("prof/op_statistic.csv")));
  ASSERT_FALSE(statistic.empty());
  for (const char *column : {"Device_id", "OP Type", "Count", "Total Time(us)", "Avg Time(us)",
                             "Min Time(us)", "Max Time(us)", "Ratio(%)"})
    EXPECT_TRUE(statistic.front().count(column)) << column;
  double ratio = 0;
  for (const auto &row : statistic)
    if (row.at("Device_id") == "0")
      ratio += std::stod(row.at("Ratio(%)"));
  EXPECT_NEAR(ratio, 100.0, 0.5);

  const auto fusion = table(slurp(path("prof/fusion_op.csv")));
  ASSERT_FALSE(fusion.empty());
  for (const auto &row : fusion) {
    EXPECT_FALSE(row.at("Formed By").empty()) << row.at("Fusion Op");
    EXPECT_GE(std::stoi(row.at("Number of Original Ops")), 2) << row.at("Fusion Op");
  }

  // The kernels and host work of a step add up to its wall time: the
  // devices of a process take turns on the host's cores. Most of it here: on
  // an idle host the rows cover over 90 % (bench/step_profile.sh prints the
  // median), but a busy one (the suite's other tests) deschedules the process
  // between rows, and under AddressSanitizer the instrumented bookkeeping
  // between kernels, which no row times, is about a third of a step.
  const double least_covered = 50.0;
  const auto steps = table(slurp(path("prof/step_trace.csv")));
  ASSERT_EQ(steps.size(), 3u);
  for (const auto &row : steps) {
    const double covered = std::stod(row.at("Covered(%)"));
    EXPECT_GT(covered, least_covered) << "step " << row.at("Step Id");
    EXPECT_LT(covered, 110.0) << "step " << row.at("Step Id");
    // Weights, moments and inputs are shared, never copied: each weight is
    // stored once per device through the step.
    EXPECT_EQ(row.at("Copied(bytes)"), "0") << "step " << row.at("Step Id");
    // The matmul kernels' time is part of the kernels' time, and their FLOPs
    // at the host's best GEMM rate (the floor) take some time.
    const double gemm = std::stod(row.at("GEMM Time(us)"));
    EXPECT_GT(gemm, 0) << "step " << row.at("Step Id");
    EXPECT_LE(gemm, std::stod(row.at("Kernel Time(us)"))) << "step " << row.at("Step Id");
    EXPECT_GT(std::stod(row.at("GEMM Floor(us)")), 0) << "step " << row.at("Step Id");
  }
  // The first steps allocate the devices' arenas (a step's gradients and an
  // update's new weights keep theirs until the next step replaces them);
  // from the third on every value lies in an arena already allocated, and a
  // step allocates only its inputs (token ids, labels, scalars: under 1 KiB
  // for the two replicas here, where the smallest weight has 256 bytes and
  // the embedding 128 KiB).
  EXPECT_GT(std::stoll(steps[0].at("Allocated(bytes)")), 100'000);
  EXPECT_LT(std::stoll(steps[2].at("Allocated(bytes)")), 1024) << "step 3";

  const nlohmann::json trace = nlohmann::json::parse(slurp(path("prof/trace.json")));
  std::map<int, int> per_track;
  for (const auto &e : trace["traceEvents"])
    if (e["ph"] == "X")
      ++per_track[e["tid"].get<int>()];
  EXPECT_EQ(per_track.size(), 2u) << "one track per device";
}

TEST_F(ProfileCli, RunProfilesOneStep) {
  ASSERT_EQ(run("make-inputs " + kTiny + " --batch 2 --seq 8 -o in.safetensors").exit_code, 0);
  ASSERT_EQ(run("init " + kTiny + " -o w.safetensors").exit_code, 0);
  Result r = run("run " + kTiny +
                 " --weights w.safetensors --inputs in.safetensors --outputs out.safetensors "
                 "--training --profile prof");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto summary = table(slurp(path("prof/op_summary.csv")));
  ASSERT_FALSE(summary.empty());
  for (const auto &row : summary) {
    EXPECT_EQ(row.at("Step Id"), "1");
    EXPECT_EQ(row.at("Device_id"), "0");
  }
}

TEST_F(ProfileCli, AnUnwritableProfileFolderIsAClearError) {
  write("file", "x");
  Result r = run("train " + kTiny +
                 " --data train.bin --batch 4 --seq 16 --steps 1 --devices 1 --profile file/prof");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--profile"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("file/prof"), std::string::npos) << r.err;
}

} // namespace
} // namespace kiln
