// Job files and job resolution: fields, errors, target constraints, and the
// switch layers in the order docs/job.md promises.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/driver/job.h"

namespace kiln::driver {
namespace {

namespace fs = std::filesystem;

class JobTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kiln_job_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string &name, const std::string &text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  Expected<JobSettings> job(const std::string &text) {
    return readJobFile(write("job.json", text));
  }
  fs::path dir_;
};

TEST_F(JobTest, ReadsEveryField) {
  write("off.cfg", "TbeEltwiseFusionPass:off\n");
  auto j = job(R"({"format": "kiln.job", "version": 1, "name": "ft", "target": "ascend910",
                   "precision": {"dtype": "f32", "overflow_mode": "saturation"},
                   "fusion_switch": "off.cfg", "enable_passes": ["A"], "disable_passes": ["B"],
                   "fusion_rules": ["rules"], "allow_unknown_passes": true})");
  ASSERT_TRUE(j) << j.message();
  EXPECT_EQ(j->target, "ascend910");
  EXPECT_EQ(j->dtype, DType::F32);
  EXPECT_EQ(j->overflow, OverflowMode::Saturation);
  ASSERT_TRUE(j->fusion_switch);
  EXPECT_EQ(j->fusion_switch->passes.size(), 1u);
  EXPECT_EQ(j->enable_passes, std::vector<std::string>{"A"});
  EXPECT_EQ(j->disable_passes, std::vector<std::string>{"B"});
  ASSERT_EQ(j->fusion_rule_dirs.size(), 1u);
  EXPECT_EQ(fs::path(j->fusion_rule_dirs[0]), dir_ / "rules") << "relative to the job file";
  EXPECT_TRUE(j->allow_unknown_passes);
}

TEST_F(JobTest, FusionSwitchObjectInEitherForm) {
  auto whole = job(R"({"fusion_switch": {"Switch": {"UBFusion": {"ALL": "off"}}}})");
  ASSERT_TRUE(whole) << whole.message();
  EXPECT_EQ(whole->fusion_switch->all.size(), 1u);
  auto inner = job(R"({"fusion_switch": {"UBFusion": {"X": "off"}}})");
  ASSERT_TRUE(inner) << inner.message();
  ASSERT_EQ(inner->fusion_switch->locations.size(), 1u);
  EXPECT_EQ(inner->fusion_switch->locations[0], "$.fusion_switch.UBFusion.X");
}

TEST_F(JobTest, BadJobFilesNameTheFileAndPath) {
  struct Case {
    const char *text;
    const char *expect;
  };
  for (const Case &c : std::vector<Case>{
           {R"({"targt": "ascend910"})", "$.targt: unknown field"},
           {R"({"precision": {"dtype": "f64"}})", "$.precision.dtype: expected f32, f16 or bf16"},
           {R"({"precision": {"overflow_mode": "wrap"}})", "$.precision.overflow_mode"},
           {R"({"precision": {"loss_scale": 1}})", "$.precision.loss_scale: unknown field"},
           {R"({"disable_passes": "X"})", "$.disable_passes: expected an array of strings"},
           {R"({"disable_passes": [1]})", "$.disable_passes[0]: expected a string"},
           {R"({"enable_passes": ["X"], "disable_passes": ["X"]})",
            "'X' is both enabled and disabled"},
           {R"({"fusion_switch": {"UBFusion": {"X": "no"}}})",
            "$.fusion_switch.UBFusion.X: expected \"on\" or \"off\""},
           {R"({"fusion_switch": 3})", "$.fusion_switch: expected CANN's Switch object"},
           {R"({"format": "kiln.graph"})", "$.format: expected \"kiln.job\""},
           {R"({"version": 2})", "$.version: unsupported version"},
           {R"({"allow_unknown_passes": "yes"})", "$.allow_unknown_passes: expected true or false"},
           {R"([1, 2])", "expected an object"},
           {R"({"target": )", "line 1"},
           {R"({"recompute": "some"})",
            "$.recompute: expected none, selective, full or an array of layer indices"},
           {R"({"recompute": [0, -1]})", "$.recompute[1]: expected a layer >= 0"},
       }) {
    auto j = job(c.text);
    ASSERT_FALSE(j) << c.text;
    EXPECT_NE(j.message().find("job.json"), std::string::npos) << j.message();
    EXPECT_NE(j.message().find(c.expect), std::string::npos) << c.text << "\n" << j.message();
  }
  // Resource limits: a switch file that never ends is refused at the limit,
  // naming the job file, its field and the file.
  auto endless = job(R"({"fusion_switch": "/dev/zero"})");
  ASSERT_FALSE(endless);
  EXPECT_NE(endless.message().find("job.json: $.fusion_switch: /dev/zero: cannot read: larger "
                                   "than 268435456 bytes"),
            std::string::npos)
      << endless.message();
  auto missing = readJobFile((dir_ / "absent.json").string());
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("absent.json"), std::string::npos);
}

TEST_F(JobTest, TargetConstrainsDTypeAndOverflow) {
  JobSettings cli;
  cli.target = "ascend910";
  auto r = resolveJob(std::nullopt, cli, DType::F16);
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(r->overflow, OverflowMode::Saturation) << "ascend910 only saturates";
  EXPECT_EQ(r->dtype, DType::F16);

  cli.overflow = OverflowMode::InfNan;
  auto infnan = resolveJob(std::nullopt, cli, DType::F16);
  ASSERT_FALSE(infnan);
  EXPECT_NE(infnan.message().find("ascend910 does not support overflow mode infnan"),
            std::string::npos)
      << infnan.message();

  cli.overflow.reset();
  cli.dtype = DType::BF16;
  auto bf16 = resolveJob(std::nullopt, cli, DType::F16);
  ASSERT_FALSE(bf16);
  EXPECT_NE(bf16.message().find("ascend910 has no bf16"), std::string::npos) << bf16.message();

  JobSettings b;
  auto def = resolveJob(std::nullopt, b, DType::F32);
  ASSERT_TRUE(def) << def.message();
  EXPECT_EQ(def->target.name, "ascend910b");
  EXPECT_EQ(def->overflow, OverflowMode::InfNan);
  EXPECT_EQ(def->dtype, DType::F32);

  JobSettings unknown;
  unknown.target = "ascend310";
  auto u = resolveJob(std::nullopt, unknown, DType::F16);
  ASSERT_FALSE(u);
  EXPECT_NE(u.message().find("unknown target 'ascend310' (built-in targets: ascend910, ascend910b"),
            std::string::npos)
      << u.message();
}

TEST_F(JobTest, CommandLineBeatsJobFile) {
  JobSettings file;
  file.source = "job.json";
  file.target = "ascend910";
  file.dtype = DType::F32;
  JobSettings cli;
  cli.target = "ascend910b";
  auto r = resolveJob(file, cli, DType::F16);
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(r->target.name, "ascend910b");
  EXPECT_EQ(r->dtype, DType::F32) << "the job file's dtype stays when the command line has none";
}

// Recomputation: a mode or MindFormers' list of layers in the job file, the
// command line's mode over the file's, the layers kept from the file.
TEST_F(JobTest, RecomputeFromTheJobFileAndTheCommandLine) {
  auto list = job(R"({"recompute": [1, 3]})");
  ASSERT_TRUE(list) << list.message();
  auto r = resolveJob(*list, JobSettings{}, DType::F16);
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(passes::recomputeSettings(*r->context).mode, passes::RecomputeMode::Full);
  EXPECT_EQ(passes::recomputeSettings(*r->context).layers, (std::set<int64_t>{1, 3}));
  EXPECT_EQ(passes::recomputeSettings(*r->context).toString(), "full (layers 1,3)");

  JobSettings cli;
  cli.recompute = passes::RecomputeMode::Selective;
  r = resolveJob(*list, cli, DType::F16);
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(passes::recomputeSettings(*r->context).mode, passes::RecomputeMode::Selective);
  EXPECT_EQ(passes::recomputeSettings(*r->context).layers, (std::set<int64_t>{1, 3}));

  auto mode = job(R"({"recompute": "selective"})");
  ASSERT_TRUE(mode) << mode.message();
  r = resolveJob(*mode, JobSettings{}, DType::F16);
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(passes::recomputeSettings(*r->context).mode, passes::RecomputeMode::Selective);
  EXPECT_TRUE(passes::recomputeSettings(*r->context).layers.empty());
  r = resolveJob(std::nullopt, JobSettings{}, DType::F16);
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(passes::recomputeSettings(*r->context).mode, passes::RecomputeMode::None);
}

// Pass options: the job file's pass_options, the flags that are one pass's
// option, and --pass-option, the command line last; names and values checked
// with codes when the job is resolved.
TEST_F(JobTest, PassOptionsFromTheJobFileAndTheCommandLine) {
  auto file = job(R"({"recompute": "selective",
                      "pass_options": {"RecomputePass": {"mode": "full", "layers": [0, 1]}}})");
  ASSERT_TRUE(file) << file.message();
  auto r = resolveJob(*file, JobSettings{}, DType::F16);
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(passes::recomputeSettings(*r->context).toString(), "full (layers 0,1)")
      << "pass_options beats the file's own recompute field";
  const passes::PassOptions recompute = r->context->options(passes::kRecomputePassName);
  EXPECT_NE(recompute.source("mode").find("$.pass_options.RecomputePass.mode"), std::string::npos)
      << recompute.source("mode");

  JobSettings cli;
  cli.attention_fp32_layers = std::set<int64_t>{2};
  cli.pass_options = {{"RecomputePass", "layers", "3", "--pass-option"}};
  r = resolveJob(*file, cli, DType::F16);
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(passes::recomputeSettings(*r->context).layers, (std::set<int64_t>{3}));
  const passes::PassOptions attention = r->context->options(passes::kAttentionFp32CastPassName);
  EXPECT_EQ(attention.getInts("layers"), (std::set<int64_t>{2}));
  EXPECT_EQ(attention.source("layers"), "--attention-fp32-layers");
}

TEST_F(JobTest, AnUnknownPassOptionOrABadValueIsCoded) {
  auto unknown = job(R"({"pass_options": {"RecomputePass": {"mod": "full"}}})");
  ASSERT_TRUE(unknown) << unknown.message();
  auto r = resolveJob(*unknown, JobSettings{}, DType::F16);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), passes::kErrUnknownPassOption);
  EXPECT_NE(r.message().find("$.pass_options.RecomputePass.mod"), std::string::npos) << r.message();

  auto bad = job(R"({"pass_options": {"RecomputePass": {"layers": "0,x"}}})");
  ASSERT_TRUE(bad) << bad.message();
  r = resolveJob(*bad, JobSettings{}, DType::F16);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), passes::kErrBadPassOptionValue);

  EXPECT_FALSE(job(R"({"pass_options": {"RecomputePass": "full"}})"))
      << "a pass's options are an object";
  EXPECT_FALSE(job(R"({"pass_options": {"RecomputePass": {"mode": {"x": 1}}}})"))
      << "a value is a string, an integer, a boolean or an array of integers";
}

} // namespace
} // namespace kiln::driver
