// kiln report's inputs: each kind recognised by its content, read into
// what the page draws, and anything else refused with the file's name.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <unistd.h>

#include "compiler/report/report_inputs.h"

namespace kiln::report {
namespace {

namespace fs = std::filesystem;

class ReportInputs : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kiln_report_inputs_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string &name, const std::string &text) {
    fs::create_directories((dir_ / name).parent_path());
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return (dir_ / name).string();
  }
  fs::path dir_;
};

const char *const kLog =
    R"({"grad_norm":1.5,"loss":6.2,"loss_scale":65536.0,"lr":0.001,"overflow":false,"seconds":0.01,"step":1,"tokens_per_s":1000.0}
{"grad_norm":null,"loss":6.1,"loss_scale":65536.0,"lr":0.001,"overflow":true,"seconds":0.01,"step":2,"tokens_per_s":1100.0}
{"grad_norm":1.2,"loss":null,"loss_scale":32768.0,"lr":0.001,"overflow":false,"seconds":0.01,"step":3,"tokens_per_s":1200.0,"eval_loss":5.9}
)";

const char *const kPlan = R"({"candidates": [
  {"flags": "--tp 1 --zero 2", "peak_bytes": 1000, "fits": true, "tokens_per_s_per_device": 50.0, "reason": "",
   "memory": {"at": "update", "parts": [{"name": "weights", "bytes": 600}, {"name": "optimizer state", "bytes": 400}]}},
  {"flags": "--tp 2", "peak_bytes": 3000, "fits": false, "tokens_per_s_per_device": 80.0, "reason": "needs more"}],
  "recommended": {"flags": "--tp 1 --zero 2"}, "device_memory": 2000, "devices": 4,
  "target": "ascend910b", "command": "kiln train M --tp 1"})";

const char *const kSummary =
    "Step Id,Device_id,Op Name,OP Type,Task Type,Task Start Time(us),Task Duration(us)\n"
    "1,0,batch and inputs,batch and inputs,HOST,0,5\n"
    "1,0,fused.h.0.mlp,matmul_fixpipe,AI_CORE,5,30\n"
    "1,0,\"odd,name\",eltwise,AI_VECTOR_CORE,35,10\n"
    "2,1,fused.h.0.mlp,matmul_fixpipe,AI_CORE,0,20\n";

TEST_F(ReportInputs, ReadsATrainingLogWithNullsOverflowAndEvaluation) {
  auto input = readReportInput(write("log.jsonl", kLog));
  ASSERT_TRUE(input.isOk()) << input.message();
  const auto *log = std::get_if<TrainingLog>(&*input);
  ASSERT_NE(log, nullptr);
  ASSERT_EQ(log->steps.size(), 3u);
  EXPECT_FALSE(log->steps[1].grad_norm); // null on overflow
  EXPECT_TRUE(log->steps[1].overflow);
  EXPECT_FALSE(log->steps[2].loss);
  EXPECT_DOUBLE_EQ(log->steps[2].eval.at("eval_loss"), 5.9);
}

TEST_F(ReportInputs, AResumedLogKeepsTheLastLineOfEachStep) {
  auto log = parseTrainingLog("{\"step\":2,\"loss\":1}\n{\"step\":1,\"loss\":2}\n"
                              "{\"step\":2,\"loss\":3}\n",
                              "log");
  ASSERT_TRUE(log.isOk()) << log.message();
  ASSERT_EQ(log->steps.size(), 2u);
  EXPECT_EQ(log->steps[0].step, 1);
  EXPECT_DOUBLE_EQ(*log->steps[1].loss, 3);
}

TEST_F(ReportInputs, ABadLineOfALogNamesItsLine) {
  auto log = readReportInput(write("log.jsonl", "{\"step\":1,\"loss\":2}\n{\"other\":1}\n"));
  ASSERT_FALSE(log.isOk());
  EXPECT_NE(log.message().find("log.jsonl:2"), std::string::npos) << log.message();
}

TEST_F(ReportInputs, ReadsAPlanAndItsRecommendedLayout) {
  auto input = readReportInput(write("plan.json", kPlan));
  ASSERT_TRUE(input.isOk()) << input.message();
  const auto *plan = std::get_if<LayoutPlan>(&*input);
  ASSERT_NE(plan, nullptr);
  ASSERT_EQ(plan->candidates.size(), 2u);
  EXPECT_TRUE(plan->candidates[0].recommended);
  EXPECT_FALSE(plan->candidates[1].recommended);
  EXPECT_FALSE(plan->candidates[1].fits);
  EXPECT_EQ(plan->device_memory, 2000);
  EXPECT_EQ(plan->target, "ascend910b");
  EXPECT_EQ(plan->candidates[0].memory_at, "update");
  EXPECT_EQ(plan->candidates[0].memory, (std::vector<std::pair<std::string, int64_t>>{
                                            {"weights", 600}, {"optimizer state", 400}}));
  EXPECT_TRUE(plan->candidates[1].memory.empty());
}

TEST_F(ReportInputs, ReadsAProfileFolderSummedByKernelAndOpType) {
  write("prof/op_summary.csv", kSummary);
  write("prof/fusion_op.csv", "Program,Fusion Op,Formed By\nstep,fused.h.0.mlp,MatmulPass\n");
  auto input = readReportInput((dir_ / "prof").string());
  ASSERT_TRUE(input.isOk()) << input.message();
  const auto *profile = std::get_if<Profile>(&*input);
  ASSERT_NE(profile, nullptr);
  EXPECT_EQ(profile->steps, 2);
  EXPECT_EQ(profile->devices, 2);
  EXPECT_DOUBLE_EQ(profile->total_us, 65);
  ASSERT_EQ(profile->kernels.size(), 2u); // the HOST row is not a kernel
  EXPECT_EQ(profile->kernels[0].name, "fused.h.0.mlp");
  EXPECT_EQ(profile->kernels[0].count, 2);
  EXPECT_DOUBLE_EQ(profile->kernels[0].total_us, 50);
  EXPECT_EQ(profile->kernels[0].formed_by, "MatmulPass");
  EXPECT_EQ(profile->kernels[1].name, "odd,name"); // a quoted field
  ASSERT_EQ(profile->op_types.size(), 3u);
  EXPECT_EQ(profile->op_types.back().name, "batch and inputs");
}

TEST_F(ReportInputs, RefusesWhatItDoesNotKnowNamingTheFile) {
  for (const auto &[name, text] :
       std::vector<std::pair<std::string, std::string>>{{"notes.txt", "hello\n"},
                                                        {"other.json", R"({"nodes": []})"},
                                                        {"empty.jsonl", ""},
                                                        {"lines.jsonl", "{\"step\": 1}\n"}}) {
    auto input = readReportInput(write(name, text));
    ASSERT_FALSE(input.isOk()) << name;
    EXPECT_NE(input.message().find(name), std::string::npos) << input.message();
    EXPECT_NE(input.message().find("--log-json"), std::string::npos) << input.message();
  }
  fs::create_directories(dir_ / "folder");
  auto folder = readReportInput((dir_ / "folder").string());
  ASSERT_FALSE(folder.isOk());
  EXPECT_NE(folder.message().find("op_summary.csv"), std::string::npos) << folder.message();
  auto missing = readReportInput((dir_ / "none.json").string());
  ASSERT_FALSE(missing.isOk());
  EXPECT_NE(missing.message().find("none.json"), std::string::npos) << missing.message();
}

TEST_F(ReportInputs, SeveralAreReadInOrderAndTheFirstBadOneNamed) {
  const std::string log = write("log.jsonl", kLog), plan = write("plan.json", kPlan);
  auto both = readReportInputs({plan, log});
  ASSERT_TRUE(both.isOk()) << both.message();
  ASSERT_EQ(both->size(), 2u);
  EXPECT_NE(std::get_if<LayoutPlan>(&(*both)[0]), nullptr);
  EXPECT_NE(std::get_if<TrainingLog>(&(*both)[1]), nullptr);
  auto bad = readReportInputs({log, (dir_ / "missing.jsonl").string(), plan});
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.message().rfind((dir_ / "missing.jsonl").string(), 0), 0u);
}

TEST_F(ReportInputs, AProfileWithoutItsColumnsIsRefused) {
  write("prof/op_summary.csv", "a,b\n1,2\n");
  auto input = readReportInput((dir_ / "prof").string());
  ASSERT_FALSE(input.isOk());
  EXPECT_NE(input.message().find("Step Id"), std::string::npos) << input.message();
}

} // namespace
} // namespace kiln::report
