// Artifacts as a user meets them: kiln compile -o job.kiln with several
// sequence lengths, kiln inspect, kiln run job.kiln (no compiling, the same
// numbers as the model compiled and run) and every way it refuses to run.
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "formats/safetensors.h"
#include "tests/e2e/cli_fixture.h"
#include "tests/support/codegen_test_util.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using nlohmann::json;

class ArtifactCli : public Cli {
protected:
  void SetUp() override {
    Cli::SetUp();
    ASSERT_EQ(run("init " + kTiny + " -o " + path("w.safetensors")).exit_code, 0);
    for (int seq : {8, 12, 16})
      ASSERT_EQ(run("make-inputs " + kTiny + " --seq " + std::to_string(seq) + " --seed " +
                    std::to_string(seq) + " -o " + path("i" + std::to_string(seq) + ".safetensors"))
                    .exit_code,
                0);
  }

  // Compiles the tiny model (f16) at seq 8 and 16 into job.kiln.
  void compileJob(const std::string &extra = "") {
    Result r =
        run("compile " + kTiny + " --seq 8,16 --dtype f16 -o " + path("job.kiln") + " " + extra);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_NE(r.out.find("wrote " + path("job.kiln") + ": 2 buckets (seq 8, 16)"),
              std::string::npos)
        << r.out;
  }

  std::string runArgs(const std::string &model, int seq, const std::string &out) {
    return "run " + model + " --weights " + path("w.safetensors") + " --inputs " +
           path("i" + std::to_string(seq) + ".safetensors") + " --outputs " + path(out);
  }

  static std::map<std::string, Tensor> outputs(const std::string &file) {
    auto f = readSafetensors(file);
    EXPECT_TRUE(f) << f.message();
    return f ? f->tensors : std::map<std::string, Tensor>{};
  }
};

TEST_F(ArtifactCli, CompileInspectAndRunWithoutCompiling) {
  compileJob();

  Result text = run("inspect " + path("job.kiln"));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  for (const char *want : {"kiln artifact, format 3", "runs here   yes", "target      ascend910b",
                           "bucket seq 8 (batch 1)", "bucket seq 16 (batch 1)", "fusion groups:",
                           "RmsNormFusionPass", "memory plan: peak", "LARGEST", "KEY"})
    EXPECT_NE(text.out.find(want), std::string::npos) << "missing '" << want << "' in:\n"
                                                      << text.out;
  Result js = run("inspect " + path("job.kiln") + " --format json");
  ASSERT_EQ(js.exit_code, 0) << js.err;
  json summary = json::parse(js.out);
  EXPECT_EQ(summary["runs_here"], true);
  ASSERT_EQ(summary["buckets"].size(), 2u);
  EXPECT_EQ(summary["manifest"]["model"]["training"], false);
  EXPECT_EQ(summary["manifest"]["job"]["dtype"], "f16");
  for (const json &b : summary["buckets"]) {
    EXPECT_GT(b["kernels"].size(), 0u);
    EXPECT_GT(b["groups"].size(), 0u);
    EXPECT_LE(b["memory"]["peak_bytes"].get<int64_t>(), b["memory"]["total_bytes"].get<int64_t>());
  }

  // Running reads no kernel cache and compiles nothing: a fresh cache stays absent.
  const std::string untouched = path("untouched-cache");
  ::setenv("KILN_CACHE_DIR", untouched.c_str(), 1);
  for (int seq : {8, 16}) {
    const std::string s = std::to_string(seq);
    Result art = run(runArgs(path("job.kiln"), seq, "art" + s + ".safetensors"));
    ASSERT_EQ(art.exit_code, 0) << art.err;
    EXPECT_NE(art.out.find("loss "), std::string::npos);
    EXPECT_FALSE(fs::exists(untouched)) << "kiln run job.kiln touched the kernel cache";

    ::setenv("KILN_CACHE_DIR", path("kernel-cache").c_str(), 1);
    Result compiled = run(runArgs(kTiny, seq, "model" + s + ".safetensors") + " --dtype f16");
    ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
    Result reference =
        run(runArgs(kTiny, seq, "ref" + s + ".safetensors") + " --dtype f16 --reference");
    ASSERT_EQ(reference.exit_code, 0) << reference.err;
    ::setenv("KILN_CACHE_DIR", untouched.c_str(), 1);

    // --reference runs the artifact's graph on the interpreter.
    Result art_ref =
        run(runArgs(path("job.kiln"), seq, "artref" + s + ".safetensors") + " --reference");
    ASSERT_EQ(art_ref.exit_code, 0) << art_ref.err;

    auto got = outputs(path("art" + s + ".safetensors"));
    auto got_ref = outputs(path("artref" + s + ".safetensors"));
    auto same = outputs(path("model" + s + ".safetensors"));
    auto ref = outputs(path("ref" + s + ".safetensors"));
    ASSERT_EQ(got.size(), 2u); // logits and loss
    for (const auto &[name, t] : same) {
      ASSERT_TRUE(got.count(name)) << name;
      EXPECT_TRUE(got.at(name) == t) << name << " differs from kiln run MODEL at seq " << seq;
      EXPECT_EQ(compareTensors(got.at(name), ref.at(name), 2e-2, 2e-2), "")
          << name << " vs the reference at seq " << seq;
      EXPECT_TRUE(got_ref.at(name) == ref.at(name)) << name << ": --reference on the artifact";
    }
  }
}

TEST_F(ArtifactCli, ASeqWithoutABucketIsAClearError) {
  compileJob();
  expectRunError(run(runArgs(path("job.kiln"), 12, "o.safetensors")),
                 {path("job.kiln"), "no bucket for seq 12", "the artifact has seq 8, 16"});
}

TEST_F(ArtifactCli, RefusesWhatTheArtifactWasNotCompiledFor) {
  compileJob();
  expectRunError(run(runArgs(path("job.kiln"), 8, "o.safetensors") + " --training"),
                 {"compiled as a forward pass", "drop --training"});
  expectUsageError(run(runArgs(path("job.kiln"), 8, "o.safetensors") + " --dtype f32"),
                   {"--dtype", "is an artifact", "fixed by kiln compile"});
  expectUsageError(run(runArgs(path("job.kiln"), 8, "o.safetensors") + " --cache-dir " + path("c")),
                   {"--cache-dir", "is an artifact"});
  ASSERT_EQ(
      run("make-inputs " + kTiny + " --batch 2 --seq 8 -o " + path("b2.safetensors")).exit_code, 0);
  expectRunError(run("run " + path("job.kiln") + " --weights " + path("w.safetensors") +
                     " --inputs " + path("b2.safetensors") + " --outputs " + path("o.safetensors")),
                 {"batch 2", "compiled for batch 1", "--batch 2"});
}

TEST_F(ArtifactCli, ACorruptOrTruncatedArtifactIsAClearError) {
  compileJob();
  const std::string bytes = slurp(path("job.kiln"));
  ASSERT_GT(bytes.size(), 1000u);
  struct Case {
    std::string name, contents, message;
  };
  std::string flipped = bytes;
  flipped[bytes.size() - 500] ^= 0x10;
  const std::vector<Case> cases = {
      {"truncated.kiln", bytes.substr(0, bytes.size() / 2), "truncated"},
      {"short.kiln", bytes.substr(0, 20), "truncated"},
      {"empty.kiln", "", "truncated"},
      {"flipped.kiln", flipped, "signature does not verify"},
      {"longer.kiln", bytes + "tail", "trailing bytes"},
      {"config.kiln", slurp(kTiny), "bad magic"},
  };
  for (const Case &c : cases) {
    write(c.name, c.contents);
    SCOPED_TRACE(c.name);
    expectRunError(run(runArgs(path(c.name), 8, "o.safetensors")), {path(c.name), c.message});
    expectRunError(run("inspect " + path(c.name)), {path(c.name), c.message});
    EXPECT_FALSE(fs::exists(path("o.safetensors")));
  }
  expectRunError(run("inspect " + path("absent.kiln")), {path("absent.kiln")});
}

TEST_F(ArtifactCli, SeqListsNeedAnArtifact) {
  expectUsageError(run("compile " + kTiny + " --seq 8,16 -o " + path("g.json")),
                   {"--seq lists 2 sequence lengths", "-o FILE.kiln"});
  expectUsageError(run("compile " + kTiny + " --seq 8,16"), {"-o FILE.kiln"});
  expectUsageError(run("compile " + kTiny + " --seq 8,8 -o " + path("j.kiln")),
                   {"--seq lists 8 twice"});
  expectUsageError(run("compile " + kTiny + " --seq 8 --passes-only -o " + path("j.kiln")),
                   {"--passes-only"});
  // One seq with .json output is the graph, as before.
  Result r = run("compile " + kTiny + " --seq 8 -o " + path("g.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(slurp(path("g.json")))["format"], "kiln.graph");
  // A report of several buckets holds one report per seq.
  r = run("compile " + kTiny + " --seq 8,16 --report " + path("r.json") + " -o " + path("j.kiln"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = json::parse(slurp(path("r.json")));
  ASSERT_EQ(report["buckets"].size(), 2u);
  EXPECT_EQ(report["buckets"][1]["seq"], 16);
  EXPECT_TRUE(report["buckets"][0].contains("kernels"));
}

TEST_F(ArtifactCli, KernelsThatFellBackAreNotWritten) {
  // A 1 KiB Unified Buffer: the fused RMSNorm no longer fits and falls back.
  std::string target = slurp(kSource + "/target/data/ascend910b.json");
  target.replace(target.find("196608"), 6, "1024");
  write("small_ub.json", target);
  Result r = run("compile " + kTiny + " --seq 8 --target " + path("small_ub.json") +
                 " --on-compile-error fallback -o " + path("fb.kiln"));
  EXPECT_FALSE(r.signaled);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("kiln: error: " + path("fb.kiln") + ": seq 8: "), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("fell back"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("fb.kiln")));
}

TEST_F(ArtifactCli, ATrainingArtifactRunsTheWholeStep) {
  Result r = run("compile " + kTiny + " --training --seq 8 -o " + path("train.kiln"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string args = "run " + path("train.kiln") + " --weights " + path("w.safetensors") +
                           " --training --outputs " + path("o.safetensors") + " --inputs ";
  expectRunError(run(args + path("i8.safetensors")),
                 {"whole training step with AdamW", "missing", "'lr' f32[]"});
  expectRunError(run(runArgs(path("train.kiln"), 8, "o.safetensors")),
                 {"compiled as a whole training step", "run it with --training"});

  // First step: zero moments, step 0.
  auto weights = readSafetensors(path("w.safetensors"));
  auto data = readSafetensors(path("i8.safetensors"));
  ASSERT_TRUE(weights && data);
  SafetensorsFile inputs = *data;
  for (const auto &[name, t] : weights->tensors) {
    inputs.tensors["adam.m." + name] = Tensor(TensorType{DType::F32, t.shape()});
    inputs.tensors["adam.v." + name] = Tensor(TensorType{DType::F32, t.shape()});
  }
  inputs.tensors["adam.step"] = Tensor::scalar(DType::I64, 0);
  inputs.tensors["lr"] = Tensor::scalar(DType::F32, 1e-3);
  ASSERT_TRUE(writeSafetensors(path("step.safetensors"), inputs));
  Result step = run(args + path("step.safetensors"));
  ASSERT_EQ(step.exit_code, 0) << step.err;
  auto out = outputs(path("o.safetensors"));
  ASSERT_TRUE(out.count("loss") && out.count("grad_norm") && out.count("adam.step"));
  EXPECT_EQ(out.at("adam.step").getInt(0), 1);
  for (const auto &[name, t] : weights->tensors)
    EXPECT_TRUE(out.count(name)) << "no updated parameter " << name;

  Result ref = run(runArgs(kTiny, 8, "ref.safetensors") + " --training --reference --dtype f16");
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  auto want = outputs(path("ref.safetensors"));
  EXPECT_EQ(compareTensors(out.at("loss").castTo(DType::F32), want.at("loss"), 2e-2, 2e-2), "");
  EXPECT_EQ(
      compareTensors(out.at("grad_norm").castTo(DType::F32), want.at("grad_norm"), 5e-2, 5e-2), "");
}

} // namespace
} // namespace kiln

namespace kiln {
namespace {

// An artifact carries the custom op definitions its graph uses: it is
// inspected and run in a process that was never given --custom-ops, with
// the numbers of the model compiled and run from its folder.
TEST_F(Cli, AnArtifactCarriesItsCustomOps) {
  const std::string example = kSource + "/examples/custom-ops";
  const std::string model = example + "/graph.json --job " + example + "/job.json";
  ASSERT_EQ(run("init " + model + " -o w.st").exit_code, 0);
  ASSERT_EQ(run("make-inputs " + model + " -o in.st").exit_code, 0);
  Result compiled = run("compile " + model + " --dtype f32 -o ops.kiln");
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;

  Result inspect = run("inspect ops.kiln --format json");
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  json summary = json::parse(inspect.out);
  EXPECT_EQ(summary["custom_ops"], json::array({"ops.xml"}));
  EXPECT_EQ(summary["runs_here"], true);

  Result art = run("run ops.kiln --weights w.st --inputs in.st --outputs art.st");
  ASSERT_EQ(art.exit_code, 0) << art.err;
  Result direct = run("run " + model + " --weights w.st --inputs in.st --outputs direct.st");
  ASSERT_EQ(direct.exit_code, 0) << direct.err;
  auto got = readSafetensors(path("art.st"));
  auto want = readSafetensors(path("direct.st"));
  ASSERT_TRUE(got.isOk() && want.isOk());
  ASSERT_EQ(got->tensors.size(), 2u); // logits and loss
  for (const auto &[name, t] : want->tensors)
    EXPECT_TRUE(got->tensors.at(name) == t) << name;
}

} // namespace
} // namespace kiln
